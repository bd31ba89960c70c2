#include "broker/audit/store.h"

#include <stdexcept>

#include <sqlite3.h>

namespace zn::broker {

namespace {

// 2: audit_checkpoint (retention). A build that knows only 1 refuses a 2 store.
constexpr int kSchemaVersion = 2;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS audit (
  seq    INTEGER PRIMARY KEY,
  ts     TEXT NOT NULL,
  event  TEXT NOT NULL,
  sid    TEXT NOT NULL,
  detail TEXT NOT NULL,
  prev   TEXT NOT NULL,
  hash   TEXT NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS audit_sid_ts ON audit(sid, ts);
CREATE INDEX IF NOT EXISTS audit_event_ts ON audit(event, ts);
CREATE TABLE IF NOT EXISTS audit_checkpoint (
  id   INTEGER PRIMARY KEY CHECK (id = 1),
  seq  INTEGER NOT NULL,
  hash TEXT NOT NULL,
  ts   TEXT NOT NULL,
  kid  TEXT NOT NULL,
  sig  TEXT NOT NULL
) STRICT;
)sql";

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  std::string msg = "audit store: " + what;
  if (db) msg += ": " + std::string(sqlite3_errmsg(db));
  throw std::runtime_error(msg);
}

struct Stmt {  // a reusable prepared statement, reset on scope exit
  explicit Stmt(sqlite3_stmt* s) : s(s) {}
  ~Stmt() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
  sqlite3_stmt* s;
};

struct OwnedStmt {  // a one-off prepared statement
  ~OwnedStmt() { sqlite3_finalize(s); }
  sqlite3_stmt* s = nullptr;
};

std::string col_text(sqlite3_stmt* s, int i) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  if (!p) return {};
  return std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, i)));
}

// SQLITE_STATIC: not copied. Every caller steps and resets the statement
// (Stmt, OwnedStmt) while the string it bound is still alive.
void bind_text(sqlite3* db, sqlite3_stmt* s, int i, const std::string& v) {
  if (sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC) != SQLITE_OK)
    fail(db, "bind");
}

}  // namespace

AuditStore::AuditStore(const std::string& path, Mode mode) {
  const int flags =
      (mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
      SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg =
        "audit store: cannot open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw std::runtime_error(msg);
  }
  try {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, 5000);
    // A page cache of 512 KiB per connection, not SQLite's 2 MiB: appends
    // touch the right edge of the table and its indexes, a query reads once,
    // and the OS caches the file anyway. Measured (issue 32): after 2,000
    // sessions created and deleted, the default caches were most of the RSS
    // zerod kept (2.3 MB of 3 MB still allocated, per jemalloc's profile).
    exec("PRAGMA cache_size=-512");
    if (mode == Mode::kReadWrite) {
      // WAL: readers (znctl audit query/verify) never block the writer.
      // synchronous=FULL: each append's commit is fsync'ed to the WAL before
      // append() returns. NORMAL would only risk the last few records on power
      // loss, but losing audit records silently (and losing the chain head the
      // journal copy already announced) is what an audit trail must not do.
      exec("PRAGMA journal_mode=WAL");
      exec("PRAGMA synchronous=FULL");
      exec("PRAGMA foreign_keys=ON");
      OwnedStmt v;
      v.s = prepare("PRAGMA user_version");
      if (sqlite3_step(v.s) != SQLITE_ROW) fail(db_, "user_version");
      const int version = sqlite3_column_int(v.s, 0);
      if (version > kSchemaVersion)
        fail(nullptr, "schema version " + std::to_string(version) + " is newer than this build");
      exec("BEGIN IMMEDIATE");
      try {
        exec(kSchema);
        exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
        exec("COMMIT");
      } catch (...) {
        sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
      head_ = prepare("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1");
      insert_ =
          prepare("INSERT INTO audit(seq, ts, event, sid, detail, prev, hash) VALUES(?1,?2,?3,?4,?5,?6,?7)");
    } else {
      exec("PRAGMA query_only=ON");
      head_ = prepare("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1");
    }
  } catch (...) {
    sqlite3_finalize(head_);
    sqlite3_finalize(insert_);
    sqlite3_close_v2(db_);
    throw;
  }
}

AuditStore::~AuditStore() {
  sqlite3_finalize(head_);
  sqlite3_finalize(insert_);
  sqlite3_close_v2(db_);
}

void AuditStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    throw std::runtime_error("audit store: " + msg);
  }
}

sqlite3_stmt* AuditStore::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
    fail(db_, "prepare");
  return s;
}

AuditRecord AuditStore::append(const BuildFn& build) { return append_batch({build}).front(); }

std::vector<AuditRecord> AuditStore::append_batch(const std::vector<BuildFn>& builds) {
  if (!insert_) throw std::logic_error("audit store: opened read-only");
  exec("BEGIN IMMEDIATE");
  try {
    uint64_t last_seq = 0;
    std::string last_hash = audit_genesis_hash();
    {
      Stmt h(head_);
      int rc = sqlite3_step(h.s);
      if (rc == SQLITE_ROW) {
        last_seq = static_cast<uint64_t>(sqlite3_column_int64(h.s, 0));
        last_hash = col_text(h.s, 1);
      } else if (rc != SQLITE_DONE) {
        fail(db_, "read chain head");
      }
    }
    std::vector<AuditRecord> out;
    out.reserve(builds.size());
    for (const BuildFn& build : builds) {
      AuditRecord rec = build(last_seq, last_hash);
      Stmt ins(insert_);
      sqlite3_bind_int64(ins.s, 1, static_cast<sqlite3_int64>(rec.seq));
      bind_text(db_, ins.s, 2, rec.ts);
      bind_text(db_, ins.s, 3, rec.event);
      bind_text(db_, ins.s, 4, rec.sid);
      if (rec.detail_json.empty()) rec.detail_json = rec.detail.dump();  // bound, not copied: kept
      bind_text(db_, ins.s, 5, rec.detail_json);
      bind_text(db_, ins.s, 6, rec.prev);
      bind_text(db_, ins.s, 7, rec.hash);
      if (sqlite3_step(ins.s) != SQLITE_DONE) fail(db_, "insert");
      last_seq = rec.seq;
      last_hash = rec.hash;
      out.push_back(std::move(rec));
    }
    exec("COMMIT");
    return out;
  } catch (...) {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::string audit_checkpoint_message(const AuditCheckpoint& cp) {
  return "zeroness/audit-checkpoint/v1\n" + std::to_string(cp.seq) + ":" + cp.hash + "\n" + cp.ts + "\n" +
         cp.kid;
}

std::optional<AuditCheckpoint> AuditStore::checkpoint() {
  OwnedStmt t;
  if (sqlite3_prepare_v2(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='audit_checkpoint'",
                         -1, &t.s, nullptr) != SQLITE_OK)
    fail(db_, "prepare checkpoint");
  if (sqlite3_step(t.s) != SQLITE_ROW) return std::nullopt;  // a store made before retention existed
  OwnedStmt st;
  if (sqlite3_prepare_v2(db_, "SELECT seq, hash, ts, kid, sig FROM audit_checkpoint WHERE id = 1", -1, &st.s,
                         nullptr) != SQLITE_OK)
    fail(db_, "prepare checkpoint");
  const int rc = sqlite3_step(st.s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) fail(db_, "read checkpoint");
  AuditCheckpoint cp;
  cp.seq = static_cast<uint64_t>(sqlite3_column_int64(st.s, 0));
  cp.hash = col_text(st.s, 1);
  cp.ts = col_text(st.s, 2);
  cp.kid = col_text(st.s, 3);
  cp.sig = col_text(st.s, 4);
  return cp;
}

uint64_t AuditStore::first_seq() {
  OwnedStmt st;
  if (sqlite3_prepare_v2(db_, "SELECT seq FROM audit ORDER BY seq LIMIT 1", -1, &st.s, nullptr) != SQLITE_OK)
    fail(db_, "prepare first");
  const int rc = sqlite3_step(st.s);
  if (rc == SQLITE_DONE) return 0;
  if (rc != SQLITE_ROW) fail(db_, "read first");
  return static_cast<uint64_t>(sqlite3_column_int64(st.s, 0));
}

uint64_t AuditStore::last_seq_before(const std::string& before, uint64_t max_seq) {
  OwnedStmt st;
  if (sqlite3_prepare_v2(db_, "SELECT max(seq) FROM audit WHERE seq <= ?1 AND ts < ?2", -1, &st.s, nullptr) !=
      SQLITE_OK)
    fail(db_, "prepare age");
  sqlite3_bind_int64(st.s, 1, static_cast<sqlite3_int64>(max_seq));
  bind_text(db_, st.s, 2, before);
  const int rc = sqlite3_step(st.s);
  if (rc != SQLITE_ROW) fail(db_, "read age");
  return sqlite3_column_type(st.s, 0) == SQLITE_NULL ? 0
                                                     : static_cast<uint64_t>(sqlite3_column_int64(st.s, 0));
}

uint64_t AuditStore::prune_through(uint64_t seq, const CheckpointFn& make) {
  if (!insert_) throw std::logic_error("audit store: opened read-only");
  exec("BEGIN IMMEDIATE");
  try {
    std::string hash;
    {
      OwnedStmt st;
      if (sqlite3_prepare_v2(db_, "SELECT hash FROM audit WHERE seq = ?1", -1, &st.s, nullptr) != SQLITE_OK)
        fail(db_, "prepare prune");
      sqlite3_bind_int64(st.s, 1, static_cast<sqlite3_int64>(seq));
      if (sqlite3_step(st.s) != SQLITE_ROW)
        throw std::invalid_argument("audit prune: no record " + std::to_string(seq));
      hash = col_text(st.s, 0);
    }
    const AuditCheckpoint cp = make(seq, hash);
    uint64_t deleted = 0;
    {
      OwnedStmt del;
      if (sqlite3_prepare_v2(db_, "DELETE FROM audit WHERE seq <= ?1", -1, &del.s, nullptr) != SQLITE_OK)
        fail(db_, "prepare prune");
      sqlite3_bind_int64(del.s, 1, static_cast<sqlite3_int64>(seq));
      if (sqlite3_step(del.s) != SQLITE_DONE) fail(db_, "prune");
      deleted = static_cast<uint64_t>(sqlite3_changes(db_));
    }
    {
      OwnedStmt up;
      if (sqlite3_prepare_v2(db_,
                             "INSERT OR REPLACE INTO audit_checkpoint(id, seq, hash, ts, kid, sig) "
                             "VALUES(1, ?1, ?2, ?3, ?4, ?5)",
                             -1, &up.s, nullptr) != SQLITE_OK)
        fail(db_, "prepare checkpoint");
      sqlite3_bind_int64(up.s, 1, static_cast<sqlite3_int64>(cp.seq));
      bind_text(db_, up.s, 2, cp.hash);
      bind_text(db_, up.s, 3, cp.ts);
      bind_text(db_, up.s, 4, cp.kid);
      bind_text(db_, up.s, 5, cp.sig);
      if (sqlite3_step(up.s) != SQLITE_DONE) fail(db_, "write checkpoint");
    }
    exec("COMMIT");
    return deleted;
  } catch (...) {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

AuditStore::Head AuditStore::head() {
  Head out{0, audit_genesis_hash()};
  Stmt h(head_);
  const int rc = sqlite3_step(h.s);
  if (rc == SQLITE_ROW) {
    out.seq = static_cast<uint64_t>(sqlite3_column_int64(h.s, 0));
    out.hash = col_text(h.s, 1);
  } else if (rc != SQLITE_DONE) {
    fail(db_, "read chain head");
  }
  return out;
}

std::vector<AuditRecord> AuditStore::query(const AuditQuery& q) {
  if (q.limit == 0 || q.limit > AuditQuery::kMaxLimit)
    throw std::invalid_argument("audit query: limit must be 1.." + std::to_string(AuditQuery::kMaxLimit));

  std::string sql = "SELECT seq, ts, event, sid, detail, prev, hash FROM audit WHERE 1";
  std::vector<std::string> args;  // bound in order as ?1, ?2, ...
  auto add = [&](const char* cond, std::string v) {
    args.push_back(std::move(v));
    sql += " AND ";
    sql += cond;
    sql += " ?" + std::to_string(args.size());
  };
  if (q.sid) add("sid =", *q.sid);
  if (q.event) {
    const std::string& e = *q.event;
    if (!e.empty() && e.back() == ':') {
      if (!is_audit_event_prefix(e)) throw std::invalid_argument("audit query: unknown event category");
      // Range over the prefix: ':' + 1 == ';'. Stays on the (event, ts) index.
      add("event >=", e);
      std::string hi = e;
      hi.back() = ';';
      add("event <", hi);
    } else {
      if (!is_audit_event_name(e)) throw std::invalid_argument("audit query: unknown event name");
      add("event =", e);
    }
  }
  if (q.since) add("ts >=", format_audit_ts(*q.since));
  if (q.until) add("ts <", format_audit_ts(*q.until));
  // A number, not text: bound as an integer literal (never user text).
  if (q.after_seq) sql += " AND seq > " + std::to_string(*q.after_seq);
  const int limit_idx = static_cast<int>(args.size()) + 1;
  sql += " ORDER BY seq LIMIT ?" + std::to_string(limit_idx);

  OwnedStmt st;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) fail(db_, "prepare query");
  for (size_t i = 0; i < args.size(); ++i) bind_text(db_, st.s, static_cast<int>(i + 1), args[i]);
  if (sqlite3_bind_int64(st.s, limit_idx, static_cast<sqlite3_int64>(q.limit)) != SQLITE_OK)
    fail(db_, "bind");

  std::vector<AuditRecord> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    AuditRecord r;
    r.seq = static_cast<uint64_t>(sqlite3_column_int64(st.s, 0));
    r.ts = col_text(st.s, 1);
    r.event = col_text(st.s, 2);
    r.sid = col_text(st.s, 3);
    std::string detail = col_text(st.s, 4);
    // A tampered row must not make the query fail: verify() reports it.
    r.detail = nlohmann::json::parse(detail, nullptr, /*allow_exceptions=*/false);
    if (r.detail.is_discarded()) r.detail = detail;
    r.prev = col_text(st.s, 5);
    r.hash = col_text(st.s, 6);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) fail(db_, "query");
  return out;
}

void AuditStore::for_each_raw(const std::function<bool(const AuditRawRow&)>& fn) {
  OwnedStmt st;
  if (sqlite3_prepare_v2(db_, "SELECT seq, ts, event, sid, detail, prev, hash FROM audit ORDER BY seq", -1,
                         &st.s, nullptr) != SQLITE_OK)
    fail(db_, "prepare scan");
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    AuditRawRow r;
    r.seq = sqlite3_column_int64(st.s, 0);
    r.ts = col_text(st.s, 1);
    r.event = col_text(st.s, 2);
    r.sid = col_text(st.s, 3);
    r.detail = col_text(st.s, 4);
    r.prev = col_text(st.s, 5);
    r.hash = col_text(st.s, 6);
    if (!fn(r)) return;
  }
  if (rc != SQLITE_DONE) fail(db_, "scan");
}

}  // namespace zn::broker
