#include "broker/resources/kv_store.h"
#include "broker/resources/store_io.h"

#include <optional>
#include <stdexcept>

#include <sqlite3.h>

namespace zn::broker {

namespace {

constexpr const char* kKvSchema = R"sql(
CREATE TABLE IF NOT EXISTS kv (
  cap   TEXT NOT NULL,
  key   BLOB NOT NULL,
  value BLOB NOT NULL,
  PRIMARY KEY (cap, key)
) STRICT;
CREATE TABLE IF NOT EXISTS kv_usage (
  cap   TEXT PRIMARY KEY,
  bytes INTEGER NOT NULL,
  keys  INTEGER NOT NULL
) STRICT;
)sql";

bool bind_blob(sqlite3_stmt* s, int i, std::string_view v) {
  // A zero-length blob binds as an empty blob, not NULL (the column is NOT NULL).
  return sqlite3_bind_blob64(s, i, v.empty() ? "" : v.data(), v.size(), SQLITE_STATIC) == SQLITE_OK;
}

std::optional<StoreFailure> check_key(std::string_view key) {
  if (key.empty() || key.size() > KvStore::kMaxKeyBytes)
    return store_fail(StoreError::kBadRequest,
                      "a key is 1 to " + std::to_string(KvStore::kMaxKeyBytes) + " bytes");
  if (key.find('\0') != std::string_view::npos) return store_fail(StoreError::kBadRequest, "NUL in the key");
  return std::nullopt;
}

}  // namespace

KvStore::KvStore(const std::string& path) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = "kv store: cannot open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw std::runtime_error(msg);
  }
  auto prepare = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("kv store: prepare: ") + sqlite3_errmsg(db_));
    return s;
  };
  try {
    sqlite3_busy_timeout(db_, 5000);
    for (const char* sql :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA secure_delete=ON", kKvSchema})
      if (!exec(sql)) throw std::runtime_error(std::string("kv store: setup: ") + sqlite3_errmsg(db_));
    get_ = prepare("SELECT value FROM kv WHERE cap = ?1 AND key = ?2");
    size_ = prepare("SELECT length(value) FROM kv WHERE cap = ?1 AND key = ?2");
    put_ = prepare(
        "INSERT INTO kv(cap, key, value) VALUES(?1, ?2, ?3) "
        "ON CONFLICT(cap, key) DO UPDATE SET value = excluded.value");
    erase_ = prepare("DELETE FROM kv WHERE cap = ?1 AND key = ?2");
    erase_all_ = prepare("DELETE FROM kv WHERE cap = ?1");
    usage_ = prepare("SELECT bytes, keys FROM kv_usage WHERE cap = ?1");
    set_usage_ = prepare(
        "INSERT INTO kv_usage(cap, bytes, keys) VALUES(?1, ?2, ?3) "
        "ON CONFLICT(cap) DO UPDATE SET bytes = excluded.bytes, keys = excluded.keys");
    drop_usage_ = prepare("DELETE FROM kv_usage WHERE cap = ?1");
  } catch (...) {
    for (sqlite3_stmt* s : {get_, size_, put_, erase_, erase_all_, usage_, set_usage_, drop_usage_})
      sqlite3_finalize(s);
    sqlite3_close_v2(db_);
    throw;
  }
}

KvStore::~KvStore() {
  for (sqlite3_stmt* s : {get_, size_, put_, erase_, erase_all_, usage_, set_usage_, drop_usage_})
    sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

bool KvStore::exec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK; }

StoreFailure KvStore::internal(const char* what) {
  return store_fail(StoreError::kInternal,
                    std::string("kv store: ") + what + ": " + sqlite3_errstr(sqlite3_errcode(db_)));
}

StoreResult<KvStore::Usage> KvStore::usage(std::string_view cap_id) {
  StatementReset r(usage_);
  if (!bind_text(usage_, 1, cap_id)) return internal("bind");
  const int rc = sqlite3_step(usage_);
  if (rc == SQLITE_DONE) return Usage{};
  if (rc != SQLITE_ROW) return internal("usage");
  return Usage{static_cast<uint64_t>(sqlite3_column_int64(usage_, 0)),
               static_cast<uint64_t>(sqlite3_column_int64(usage_, 1))};
}

StoreStatus KvStore::set_usage(std::string_view cap_id, Usage u) {
  StatementReset r(set_usage_);
  if (!bind_text(set_usage_, 1, cap_id) ||
      sqlite3_bind_int64(set_usage_, 2, static_cast<int64_t>(u.bytes)) != SQLITE_OK ||
      sqlite3_bind_int64(set_usage_, 3, static_cast<int64_t>(u.keys)) != SQLITE_OK)
    return internal("bind");
  if (sqlite3_step(set_usage_) != SQLITE_DONE) return internal("usage");
  return Done{};
}

StoreResult<std::string> KvStore::get(const KvCapability& cap, std::string_view key) {
  if (auto f = check_key(key)) return *f;
  std::lock_guard lock(mutex_);
  StatementReset r(get_);
  if (!bind_text(get_, 1, cap.id) || !bind_blob(get_, 2, key)) return internal("bind");
  const int rc = sqlite3_step(get_);
  if (rc == SQLITE_DONE) return store_fail(StoreError::kNotFound, "no such key");
  if (rc != SQLITE_ROW) return internal("get");
  const auto* p = static_cast<const char*>(sqlite3_column_blob(get_, 0));
  return std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(get_, 0)));
}

StoreStatus KvStore::put(const KvCapability& cap, std::string_view key, std::string_view value) {
  if (cap.mode == AccessMode::kReadOnly) return store_fail(StoreError::kReadOnly, "read-only capability");
  if (auto f = check_key(key)) return *f;
  if (value.size() > cap.quota.max_value_bytes)
    return store_fail(StoreError::kTooLarge,
                      "value above the limit (" + std::to_string(cap.quota.max_value_bytes) + " bytes)");
  std::lock_guard lock(mutex_);
  if (!exec("BEGIN IMMEDIATE")) return internal("begin");
  auto result = [&]() -> StoreStatus {
    StoreResult<Usage> now = usage(cap.id);
    if (!now.ok()) return now.failure();
    Usage u = now.value();
    {
      StatementReset r(size_);
      if (!bind_text(size_, 1, cap.id) || !bind_blob(size_, 2, key)) return internal("bind");
      const int rc = sqlite3_step(size_);
      if (rc == SQLITE_ROW) {
        u.bytes -= key.size() + static_cast<uint64_t>(sqlite3_column_int64(size_, 0));
        u.keys -= 1;
      } else if (rc != SQLITE_DONE) {
        return internal("size");
      }
    }
    u.bytes += key.size() + value.size();
    u.keys += 1;
    if (u.keys > cap.quota.max_keys)
      return store_fail(StoreError::kQuotaExceeded,
                        "key quota (" + std::to_string(cap.quota.max_keys) + " keys) reached");
    if (u.bytes > cap.quota.max_bytes)
      return store_fail(StoreError::kQuotaExceeded,
                        "byte quota (" + std::to_string(cap.quota.max_bytes) + " bytes) reached");
    {
      StatementReset r(put_);
      if (!bind_text(put_, 1, cap.id) || !bind_blob(put_, 2, key) || !bind_blob(put_, 3, value))
        return internal("bind");
      if (sqlite3_step(put_) != SQLITE_DONE) return internal("put");
    }
    return set_usage(cap.id, u);
  }();
  if (result.ok() && !exec("COMMIT")) result = internal("commit");
  if (!result.ok()) exec("ROLLBACK");
  return result;
}

StoreStatus KvStore::erase(const KvCapability& cap, std::string_view key) {
  if (cap.mode == AccessMode::kReadOnly) return store_fail(StoreError::kReadOnly, "read-only capability");
  if (auto f = check_key(key)) return *f;
  std::lock_guard lock(mutex_);
  if (!exec("BEGIN IMMEDIATE")) return internal("begin");
  auto result = [&]() -> StoreStatus {
    StoreResult<Usage> now = usage(cap.id);
    if (!now.ok()) return now.failure();
    Usage u = now.value();
    {
      StatementReset r(size_);
      if (!bind_text(size_, 1, cap.id) || !bind_blob(size_, 2, key)) return internal("bind");
      const int rc = sqlite3_step(size_);
      if (rc == SQLITE_DONE) return store_fail(StoreError::kNotFound, "no such key");
      if (rc != SQLITE_ROW) return internal("size");
      u.bytes -= key.size() + static_cast<uint64_t>(sqlite3_column_int64(size_, 0));
      u.keys -= 1;
    }
    {
      StatementReset r(erase_);
      if (!bind_text(erase_, 1, cap.id) || !bind_blob(erase_, 2, key)) return internal("bind");
      if (sqlite3_step(erase_) != SQLITE_DONE) return internal("erase");
    }
    return set_usage(cap.id, u);
  }();
  if (result.ok() && !exec("COMMIT")) result = internal("commit");
  if (!result.ok()) exec("ROLLBACK");
  return result;
}

StoreResult<uint64_t> KvStore::erase_capability(std::string_view cap_id) {
  std::lock_guard lock(mutex_);
  if (!exec("BEGIN IMMEDIATE")) return internal("begin");
  auto result = [&]() -> StoreResult<uint64_t> {
    StatementReset r(erase_all_), d(drop_usage_);
    if (!bind_text(erase_all_, 1, cap_id) || !bind_text(drop_usage_, 1, cap_id)) return internal("bind");
    if (sqlite3_step(erase_all_) != SQLITE_DONE) return internal("erase");
    const auto n = static_cast<uint64_t>(sqlite3_changes64(db_));
    if (sqlite3_step(drop_usage_) != SQLITE_DONE) return internal("usage");
    return n;
  }();
  if (result.ok() && !exec("COMMIT")) result = internal("commit");
  if (!result.ok()) exec("ROLLBACK");
  return result;
}

}  // namespace zn::broker
