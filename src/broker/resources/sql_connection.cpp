#include "broker/resources/sql_connection.h"

#include <strings.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include <sqlite3.h>

#include "broker/resources/base64.h"
#include "broker/resources/utf8.h"

namespace zn::broker {

namespace {

// The progress handler runs every this many VM instructions.
constexpr int kProgressInterval = 1000;

// SQLite's limits below its defaults (2000 columns, depth 1000, 500 compound
// terms, 50000-byte patterns, 1000 trigger levels): a LIKE or GLOB costs up
// to the pattern's length times the value's, so its pattern stays short.
constexpr int kMaxColumns = 500;
constexpr int kMaxExprDepth = 200;
constexpr int kMaxCompoundSelect = 100;
constexpr int kMaxLikePattern = 1000;
constexpr int kMaxFunctionArgs = 100;
constexpr int kMaxTriggerDepth = 10;

// Functions refused in both modes: loading code, registering tokenizers by
// pointer, touching files (the shell's; listed in case a build has them).
constexpr std::array<std::string_view, 5> kDeniedFunctions = {"load_extension", "fts3_tokenizer", "readfile",
                                                              "writefile", "edit"};

// PRAGMAs that only describe the schema, allowed with any argument (a table
// or index name).
constexpr std::array<std::string_view, 8> kSchemaPragmas = {
    "table_info",  "table_xinfo",      "index_list",        "index_info",
    "index_xinfo", "foreign_key_list", "foreign_key_check", "quick_check"};

// PRAGMAs allowed only as a query, with no argument: with one they set.
constexpr std::array<std::string_view, 7> kQueryPragmas = {"user_version", "application_id", "schema_version",
                                                           "page_count",   "page_size",      "freelist_count",
                                                           "encoding"};

// The eponymous virtual tables a store serves, built at open (see the header).
constexpr std::array<const char*, 8> kWarmTables = {
    "SELECT * FROM json_each('[]')",        "SELECT * FROM json_tree('[]')",
    "SELECT * FROM pragma_table_info('')",  "SELECT * FROM pragma_table_xinfo('')",
    "SELECT * FROM pragma_index_list('')",  "SELECT * FROM pragma_index_info('')",
    "SELECT * FROM pragma_index_xinfo('')", "SELECT * FROM pragma_foreign_key_list('')"};

bool listed(std::string_view name, const auto& list) {
  for (std::string_view entry : list)
    if (name.size() == entry.size() && strncasecmp(name.data(), entry.data(), name.size()) == 0) return true;
  return false;
}

struct Finalizer {
  ~Finalizer() { sqlite3_finalize(s); }
  sqlite3_stmt* s = nullptr;
};

// The JSON size of a text value: quotes plus escapes, the worst case for
// control characters.
size_t json_text_size(std::string_view s) {
  size_t n = s.size() + 2;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20)
      n += 5;
    else if (c == '"' || c == '\\')
      n += 1;
  }
  return n;
}

nlohmann::json blob_json(std::string_view bytes) { return {{"base64", base64_encode(bytes)}}; }

}  // namespace

struct SqlConnection::Call {
  std::chrono::steady_clock::time_point deadline;
  uint64_t steps = 0;
  const char* stopped = nullptr;        // the budget the progress handler enforced
  std::optional<StoreFailure> refused;  // the authorizer's first refusal
};

SqlConnection::SqlConnection(SqlStoreOptions options) : options_(std::move(options)) {
  const bool ro = options_.mode == AccessMode::kReadOnly;
  int flags =
      (ro ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (!ro && options_.create_if_missing) flags |= SQLITE_OPEN_CREATE;
  // No SQLITE_OPEN_URI: the operator's path is a file name, never "file:...?vfs=".
  if (sqlite3_open_v2(options_.path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg =
        "sql store: cannot open " + options_.path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw std::runtime_error(msg);
  }
  try {
    auto config = [&](int op, int value, const char* what) {
      int now = -1;
      if (sqlite3_db_config(db_, op, value, &now) != SQLITE_OK || now != value)
        throw std::runtime_error(std::string("sql store: cannot set ") + what);
    };
    config(SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, "ENABLE_LOAD_EXTENSION");
    config(SQLITE_DBCONFIG_DEFENSIVE, 1, "DEFENSIVE");
    config(SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, "TRUSTED_SCHEMA");
    config(SQLITE_DBCONFIG_DQS_DML, 0, "DQS_DML");
    config(SQLITE_DBCONFIG_DQS_DDL, 0, "DQS_DDL");
    config(SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, "ENABLE_FTS3_TOKENIZER");

    const SqlLimits& l = options_.limits;
    auto clamp = [](uint64_t v) {
      return static_cast<int>(std::min<uint64_t>(v, std::numeric_limits<int>::max()));
    };
    sqlite3_limit(db_, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db_, SQLITE_LIMIT_SQL_LENGTH, clamp(l.max_statement_bytes));
    sqlite3_limit(db_, SQLITE_LIMIT_VARIABLE_NUMBER, l.max_params);
    sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, clamp(l.max_value_bytes));
    // Defence in depth below the process's bounds: shapes no honest query
    // needs, each of which multiplies the work or memory of one statement.
    sqlite3_limit(db_, SQLITE_LIMIT_COLUMN, kMaxColumns);
    sqlite3_limit(db_, SQLITE_LIMIT_EXPR_DEPTH, kMaxExprDepth);
    sqlite3_limit(db_, SQLITE_LIMIT_COMPOUND_SELECT, kMaxCompoundSelect);
    sqlite3_limit(db_, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, kMaxLikePattern);
    sqlite3_limit(db_, SQLITE_LIMIT_FUNCTION_ARG, kMaxFunctionArgs);
    sqlite3_limit(db_, SQLITE_LIMIT_TRIGGER_DEPTH, kMaxTriggerDepth);
    sqlite3_limit(db_, SQLITE_LIMIT_WORKER_THREADS, 0);
    if (sqlite3_limit(db_, SQLITE_LIMIT_ATTACHED, -1) != 0)
      throw std::runtime_error("sql store: cannot forbid ATTACH");
    sqlite3_busy_timeout(db_, clamp(static_cast<uint64_t>(l.time_budget.count())));

    // Sorts, DISTINCT and temporary b-trees spill to memory, not to files:
    // under the call's heap bound rather than on a disk.
    exec_internal("PRAGMA temp_store=MEMORY");
    if (ro) {
      exec_internal("PRAGMA query_only=ON");
    } else if (options_.quota_bytes > 0) {
      sqlite3_stmt* s = nullptr;
      if (sqlite3_prepare_v2(db_, "PRAGMA page_size", -1, &s, nullptr) != SQLITE_OK ||
          sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_finalize(s);
        throw std::runtime_error(std::string("sql store: page_size: ") + sqlite3_errmsg(db_));
      }
      const auto page = static_cast<uint64_t>(sqlite3_column_int64(s, 0));
      sqlite3_finalize(s);
      const uint64_t pages = std::max<uint64_t>(1, options_.quota_bytes / std::max<uint64_t>(page, 512));
      exec_internal(("PRAGMA max_page_count=" + std::to_string(pages)).c_str());
    }
    for (const char* warm : kWarmTables) {
      sqlite3_stmt* s = nullptr;
      sqlite3_prepare_v2(db_, warm, -1, &s, nullptr);  // a build without one just does not serve it
      sqlite3_finalize(s);
    }
    sqlite3_progress_handler(db_, kProgressInterval, &SqlConnection::progress, this);
    sqlite3_set_authorizer(db_, &SqlConnection::authorize, this);
    internal_ = false;
  } catch (...) {
    sqlite3_close_v2(db_);
    throw;
  }
}

SqlConnection::~SqlConnection() { sqlite3_close_v2(db_); }

void SqlConnection::exec_internal(const char* sql) {
  char* err = nullptr;
  const bool was = internal_;
  internal_ = true;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  internal_ = was;
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw std::runtime_error("sql store: " + msg);
  }
}

int SqlConnection::authorize(void* self, int action, const char* a1, const char* a2, const char* db,
                             const char* /*trigger*/) {
  return static_cast<SqlConnection*>(self)->decide(action, a1, a2, db);
}

int SqlConnection::progress(void* self) {
  auto* store = static_cast<SqlConnection*>(self);
  Call* c = store->call_;
  if (!c || store->internal_) return 0;
  c->steps += kProgressInterval;
  const uint64_t max_steps = store->options_.limits.max_vm_steps;
  if (max_steps > 0 && c->steps > max_steps) {
    c->stopped = "VM step budget";
    return 1;
  }
  if (std::chrono::steady_clock::now() > c->deadline) {
    c->stopped = "time budget";
    return 1;
  }
  return 0;
}

int SqlConnection::decide(int action, const char* a1, const char* a2, const char* db) {
  if (internal_) return SQLITE_OK;
  const bool ro = options_.mode == AccessMode::kReadOnly;
  auto deny = [&](StoreError code, std::string why) {
    if (call_ && !call_->refused) call_->refused = store_fail(code, std::move(why));
    return SQLITE_DENY;
  };
  auto write = [&](const char* what) {
    if (ro) return deny(StoreError::kReadOnly, std::string("read-only: ") + what + " refused");
    return SQLITE_OK;
  };
  auto temp = [&](const char* what) {
    if (ro) return deny(StoreError::kReadOnly, std::string("read-only: ") + what + " refused");
    return deny(StoreError::kForbidden, std::string(what) + " refused: TEMP objects are outside the quota");
  };
  const std::string_view name1 = a1 ? a1 : "", name2 = a2 ? a2 : "";
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      if (listed(name2, kDeniedFunctions))
        return deny(StoreError::kForbidden, "function " + std::string(name2) + " refused");
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      if (listed(name1, kSchemaPragmas) || (a2 == nullptr && listed(name1, kQueryPragmas))) return SQLITE_OK;
      return deny(StoreError::kForbidden, "PRAGMA " + std::string(name1) + (a2 ? " with an argument" : "") +
                                              " refused: only schema queries are allowed");
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
      return deny(StoreError::kForbidden, "ATTACH, DETACH and VACUUM refused");
    case SQLITE_TRANSACTION:
    case SQLITE_SAVEPOINT:
      return deny(StoreError::kForbidden, "transaction control refused: each call is one transaction");
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
      // No TEMP object can exist, so the only temp table is its schema,
      // which ALTER TABLE's nested statements rewrite (to no effect).
      if (!ro && db && std::string_view(db) == "temp" && name1 != "sqlite_temp_master" &&
          name1 != "sqlite_temp_schema")
        return temp("a write to temp");
      return write(action == SQLITE_INSERT ? "INSERT" : action == SQLITE_UPDATE ? "UPDATE" : "DELETE");
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE:
    case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW:
    case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TEMP_TABLE:
    case SQLITE_DROP_TEMP_TRIGGER:
    case SQLITE_DROP_TEMP_VIEW:
      return temp("CREATE/DROP TEMP");
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_VTABLE:
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_VTABLE:
    case SQLITE_ALTER_TABLE:
      return write("a schema change");
    case SQLITE_REINDEX:
      return write("REINDEX");
    case SQLITE_ANALYZE:
      return write("ANALYZE");
    default:
      return deny(StoreError::kForbidden, "operation " + std::to_string(action) + " refused");
  }
}

StoreResult<SqlOutcome> SqlConnection::execute(std::string_view statement, const nlohmann::json& params) {
  std::lock_guard lock(mutex_);
  Call call;
  call.deadline = std::chrono::steady_clock::now() + options_.limits.time_budget;
  call_ = &call;
  StoreResult<SqlOutcome> result = run(statement, params);
  call_ = nullptr;
  return result;
}

namespace {

// Binds one JSON value at index i. Empty when bound.
std::optional<StoreFailure> bind_one(sqlite3_stmt* s, int i, const nlohmann::json& v,
                                     const SqlLimits& limits) {
  const std::string where = "parameter " + std::to_string(i);
  int rc = SQLITE_OK;
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      rc = sqlite3_bind_null(s, i);
      break;
    case nlohmann::json::value_t::boolean:
      rc = sqlite3_bind_int(s, i, v.get<bool>() ? 1 : 0);
      break;
    case nlohmann::json::value_t::number_integer:
      rc = sqlite3_bind_int64(s, i, v.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return store_fail(StoreError::kBadRequest, where + ": integer out of range");
      rc = sqlite3_bind_int64(s, i, static_cast<int64_t>(u));
      break;
    }
    case nlohmann::json::value_t::number_float:
      rc = sqlite3_bind_double(s, i, v.get<double>());
      break;
    case nlohmann::json::value_t::string: {
      const auto& text = v.get_ref<const std::string&>();
      if (text.size() > limits.max_value_bytes)
        return store_fail(StoreError::kTooLarge, where + ": above the value limit (" +
                                                     std::to_string(limits.max_value_bytes) + " bytes)");
      rc = sqlite3_bind_text64(s, i, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
      break;
    }
    case nlohmann::json::value_t::object: {
      auto it = v.find("base64");
      if (v.size() != 1 || it == v.end() || !it->is_string())
        return store_fail(StoreError::kBadRequest, where + ": an object must be {\"base64\": \"...\"}");
      std::optional<std::string> bytes = base64_decode(it->get_ref<const std::string&>());
      if (!bytes) return store_fail(StoreError::kBadRequest, where + ": not canonical base64");
      if (bytes->size() > limits.max_value_bytes)
        return store_fail(StoreError::kTooLarge, where + ": above the value limit (" +
                                                     std::to_string(limits.max_value_bytes) + " bytes)");
      rc = sqlite3_bind_blob64(s, i, bytes->data(), bytes->size(), SQLITE_TRANSIENT);
      break;
    }
    default:
      return store_fail(StoreError::kBadRequest, where + ": unsupported JSON type");
  }
  if (rc != SQLITE_OK) return store_fail(StoreError::kBadRequest, where + ": " + sqlite3_errstr(rc));
  return std::nullopt;
}

std::optional<StoreFailure> bind_all(sqlite3_stmt* s, const nlohmann::json& params, const SqlLimits& limits) {
  const int count = sqlite3_bind_parameter_count(s);
  if (params.is_null()) {
    if (count != 0)
      return store_fail(StoreError::kBadRequest,
                        "the statement has " + std::to_string(count) + " parameters, none given");
    return std::nullopt;
  }
  if (params.is_array()) {
    if (params.size() != static_cast<size_t>(count))
      return store_fail(StoreError::kBadRequest, "the statement has " + std::to_string(count) +
                                                     " parameters, " + std::to_string(params.size()) +
                                                     " given");
    for (int i = 1; i <= count; ++i) {
      const char* name = sqlite3_bind_parameter_name(s, i);
      if (name && name[0] != '?')
        return store_fail(StoreError::kBadRequest,
                          std::string("named parameter ") + name + " needs an object of parameters");
      if (auto f = bind_one(s, i, params[static_cast<size_t>(i - 1)], limits)) return f;
    }
    return std::nullopt;
  }
  if (params.is_object()) {
    size_t used = 0;
    for (int i = 1; i <= count; ++i) {
      const char* name = sqlite3_bind_parameter_name(s, i);
      if (!name || name[0] == '?')
        return store_fail(StoreError::kBadRequest,
                          "positional parameter " + std::to_string(i) + " needs an array of parameters");
      auto it = params.find(name + 1);
      if (it == params.end())
        return store_fail(StoreError::kBadRequest, std::string("parameter ") + name + " missing");
      ++used;
      if (auto f = bind_one(s, i, *it, limits)) return f;
    }
    if (used != params.size())
      return store_fail(StoreError::kBadRequest, "parameters given that the statement does not name");
    return std::nullopt;
  }
  return store_fail(StoreError::kBadRequest, "parameters must be an array, an object or null");
}

}  // namespace

StoreResult<SqlOutcome> SqlConnection::run(std::string_view statement, const nlohmann::json& params) {
  const SqlLimits& limits = options_.limits;
  const bool ro = options_.mode == AccessMode::kReadOnly;
  if (statement.size() > limits.max_statement_bytes)
    return store_fail(
        StoreError::kLimitExceeded,
        "statement length limit (" + std::to_string(limits.max_statement_bytes) + " bytes) passed");
  if (statement.find('\0') != std::string_view::npos)
    return store_fail(StoreError::kBadRequest, "NUL in the statement");
  // Before the prepare, which would refuse the same with a vaguer error.
  if ((params.is_array() || params.is_object()) && params.size() > static_cast<size_t>(limits.max_params))
    return store_fail(StoreError::kLimitExceeded,
                      "parameter limit (" + std::to_string(limits.max_params) + ") passed");

  // Maps a SQLite failure, preferring what the callbacks recorded.
  auto failure = [&](int rc) -> StoreFailure {
    if (call_->refused) return *call_->refused;
    const int primary = rc & 0xff;
    if (primary == SQLITE_INTERRUPT && call_->stopped) {
      if (std::string_view(call_->stopped) == "time budget")
        return store_fail(StoreError::kLimitExceeded,
                          "time budget (" + std::to_string(limits.time_budget.count()) + " ms) passed");
      return store_fail(StoreError::kLimitExceeded,
                        "VM step budget (" + std::to_string(limits.max_vm_steps) + ") passed");
    }
    switch (primary) {
      case SQLITE_FULL:
        if (options_.quota_bytes > 0)
          return store_fail(StoreError::kQuotaExceeded,
                            "database quota (" + std::to_string(options_.quota_bytes) + " bytes) reached");
        return store_fail(StoreError::kInternal, "the disk is full");
      case SQLITE_NOMEM:
        return store_fail(StoreError::kLimitExceeded,
                          "memory limit (" + std::to_string(limits.max_memory_bytes) + " bytes) passed");
      case SQLITE_TOOBIG:
        return store_fail(StoreError::kLimitExceeded,
                          "value size limit (" + std::to_string(limits.max_value_bytes) + " bytes) passed");
      case SQLITE_READONLY:
        return store_fail(StoreError::kReadOnly, "read-only: the statement would write");
      case SQLITE_AUTH:
        return store_fail(StoreError::kForbidden, "not authorized");
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return store_fail(StoreError::kInternal, "the database is busy");
      case SQLITE_ERROR:
      case SQLITE_CONSTRAINT:
      case SQLITE_MISMATCH:
      case SQLITE_RANGE:
        // The statement's own error (syntax, a constraint's name): it quotes
        // the guest's statement at most, never stored values.
        return store_fail(StoreError::kBadRequest, sqlite3_errmsg(db_));
      default:
        return store_fail(StoreError::kInternal, std::string("sqlite: ") + sqlite3_errstr(rc));
    }
  };

  Finalizer st;
  const char* tail = nullptr;
  const int prc =
      sqlite3_prepare_v3(db_, statement.data(), static_cast<int>(statement.size()), 0, &st.s, &tail);
  if (prc != SQLITE_OK) return failure(prc);
  if (!st.s) return store_fail(StoreError::kBadRequest, "no statement");
  for (const char* p = tail; p && p < statement.data() + statement.size(); ++p)
    if (*p != ';' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      return store_fail(StoreError::kBadRequest, "exactly one statement per call");
  const bool reads_only = sqlite3_stmt_readonly(st.s) != 0;
  if (ro && !reads_only) return store_fail(StoreError::kReadOnly, "read-only: the statement would write");
  if (auto f = bind_all(st.s, params, limits)) return *f;

  // A rw write runs in its own transaction so that a limit or the quota
  // undoes all of it.
  const bool transaction = !ro && !reads_only;
  if (transaction) {
    internal_ = true;
    const int brc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    internal_ = false;
    if (brc != SQLITE_OK) return failure(brc);
  }

  SqlOutcome out;
  std::optional<StoreFailure> stop;
  const int columns = sqlite3_column_count(st.s);
  std::vector<std::string> names;
  size_t bytes = 2, rows = 0;
  for (;;) {
    const int rc = sqlite3_step(st.s);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      stop = failure(rc);
      break;
    }
    if (names.empty() && columns > 0) {
      std::unordered_set<std::string> seen;
      for (int c = 0; c < columns; ++c) {
        const char* n = sqlite3_column_name(st.s, c);
        names.emplace_back(n ? n : "");
        if (!seen.insert(names.back()).second) {
          stop = store_fail(StoreError::kBadRequest,
                            "two result columns are named " + names.back() + "; alias one");
          break;
        }
      }
      if (stop) break;
    }
    if (++rows > limits.max_rows) {
      stop = store_fail(StoreError::kLimitExceeded,
                        "row limit (" + std::to_string(limits.max_rows) + ") passed");
      break;
    }
    nlohmann::json row = nlohmann::json::object();
    bytes += 3;
    for (int c = 0; c < columns && !stop; ++c) {
      bytes += json_text_size(names[static_cast<size_t>(c)]) + 1;
      nlohmann::json value;
      switch (sqlite3_column_type(st.s, c)) {
        case SQLITE_INTEGER:
          value = static_cast<int64_t>(sqlite3_column_int64(st.s, c));
          bytes += 21;
          break;
        case SQLITE_FLOAT:
          value = sqlite3_column_double(st.s, c);
          bytes += 25;
          break;
        case SQLITE_TEXT: {
          const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st.s, c));
          std::string_view text(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st.s, c)));
          const bool utf8 = valid_utf8(text);
          bytes += utf8 ? json_text_size(text) : (text.size() + 2) / 3 * 4 + 14;
          if (bytes > limits.max_result_bytes) break;
          value = utf8 ? nlohmann::json(std::string(text)) : blob_json(text);
          break;
        }
        case SQLITE_BLOB: {
          const auto* p = static_cast<const char*>(sqlite3_column_blob(st.s, c));
          std::string_view blob(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st.s, c)));
          bytes += (blob.size() + 2) / 3 * 4 + 14;
          if (bytes > limits.max_result_bytes) break;
          value = blob_json(blob);
          break;
        }
        default:
          bytes += 4;
          break;
      }
      if (bytes > limits.max_result_bytes) {
        stop = store_fail(StoreError::kLimitExceeded,
                          "result size limit (" + std::to_string(limits.max_result_bytes) + " bytes) passed");
        break;
      }
      row[names[static_cast<size_t>(c)]] = std::move(value);
    }
    if (stop) break;
    out.rows.push_back(std::move(row));
  }
  out.changes = reads_only ? 0 : sqlite3_changes64(db_);
  sqlite3_finalize(st.s);
  st.s = nullptr;

  if (transaction) {
    internal_ = true;
    if (!stop) {
      const int crc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
      if (crc != SQLITE_OK) stop = failure(crc);
    }
    if (stop && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    internal_ = false;
  }
  if (stop) return *stop;
  return out;
}

}  // namespace zn::broker
