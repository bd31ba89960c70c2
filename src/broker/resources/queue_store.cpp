#include "broker/resources/queue_store.h"
#include "broker/resources/store_io.h"

#include <sys/random.h>

#include <stdexcept>

#include <sqlite3.h>

namespace zn::broker {

namespace {

constexpr const char* kQueueSchema = R"sql(
CREATE TABLE IF NOT EXISTS queue (
  seq        INTEGER PRIMARY KEY,
  cap        TEXT NOT NULL,
  id         TEXT NOT NULL UNIQUE,
  body       BLOB NOT NULL,
  visible_at INTEGER NOT NULL,
  receipt    TEXT,
  deliveries INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX IF NOT EXISTS queue_cap_visible ON queue(cap, visible_at, seq);
CREATE UNIQUE INDEX IF NOT EXISTS queue_receipt ON queue(receipt) WHERE receipt IS NOT NULL;
)sql";

// Empty when the kernel has no randomness to give (never in practice): the
// data path returns kInternal rather than throwing.
std::string random_hex() {
  unsigned char r[16];
  if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : r) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string column_text(sqlite3_stmt* s, int i) {
  const auto* p = static_cast<const char*>(sqlite3_column_blob(s, i));
  return std::string(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(s, i)));
}

}  // namespace

QueueStore::QueueStore(const std::string& path, Clock clock) : clock_(std::move(clock)) {
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg =
        "queue store: cannot open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw std::runtime_error(msg);
  }
  auto prepare = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("queue store: prepare: ") + sqlite3_errmsg(db_));
    return s;
  };
  try {
    sqlite3_busy_timeout(db_, 5000);
    for (const char* sql :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA secure_delete=ON", kQueueSchema})
      if (!exec(sql)) throw std::runtime_error(std::string("queue store: setup: ") + sqlite3_errmsg(db_));
    usage_ = prepare("SELECT count(*), coalesce(sum(length(body)), 0) FROM queue WHERE cap = ?1");
    insert_ = prepare("INSERT INTO queue(cap, id, body, visible_at) VALUES(?1, ?2, ?3, ?4)");
    next_ = prepare(
        "SELECT seq, id, body, deliveries FROM queue WHERE cap = ?1 AND visible_at <= ?2 "
        "ORDER BY visible_at, seq LIMIT 1");
    hide_ =
        prepare("UPDATE queue SET visible_at = ?2, receipt = ?3, deliveries = deliveries + 1 WHERE seq = ?1");
    ack_ = prepare("DELETE FROM queue WHERE cap = ?1 AND receipt = ?2 AND visible_at > ?3");
    erase_all_ = prepare("DELETE FROM queue WHERE cap = ?1");
  } catch (...) {
    for (sqlite3_stmt* s : {usage_, insert_, next_, hide_, ack_, erase_all_}) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
    throw;
  }
}

QueueStore::~QueueStore() {
  for (sqlite3_stmt* s : {usage_, insert_, next_, hide_, ack_, erase_all_}) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

bool QueueStore::exec(const char* sql) {
  return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

StoreFailure QueueStore::internal(const char* what) {
  return store_fail(StoreError::kInternal,
                    std::string("queue store: ") + what + ": " + sqlite3_errstr(sqlite3_errcode(db_)));
}

std::chrono::milliseconds QueueStore::now() const {
  if (clock_) return clock_();
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
}

StoreResult<std::string> QueueStore::send(const QueueCapability& cap, std::string_view body) {
  if (body.size() > cap.quota.max_message_bytes)
    return store_fail(StoreError::kTooLarge,
                      "message above the limit (" + std::to_string(cap.quota.max_message_bytes) + " bytes)");
  std::lock_guard lock(mutex_);
  if (!exec("BEGIN IMMEDIATE")) return internal("begin");
  auto result = [&]() -> StoreResult<std::string> {
    {
      StatementReset r(usage_);
      if (!bind_text(usage_, 1, cap.id)) return internal("bind");
      if (sqlite3_step(usage_) != SQLITE_ROW) return internal("usage");
      const auto count = static_cast<uint64_t>(sqlite3_column_int64(usage_, 0));
      const auto bytes = static_cast<uint64_t>(sqlite3_column_int64(usage_, 1));
      if (count + 1 > cap.quota.max_messages)
        return store_fail(StoreError::kQuotaExceeded,
                          "message quota (" + std::to_string(cap.quota.max_messages) + " messages) reached");
      if (bytes + body.size() > cap.quota.max_bytes)
        return store_fail(StoreError::kQuotaExceeded,
                          "byte quota (" + std::to_string(cap.quota.max_bytes) + " bytes) reached");
    }
    std::string id = random_hex();
    if (id.empty()) return store_fail(StoreError::kInternal, "queue store: getrandom failed");
    StatementReset r(insert_);
    if (!bind_text(insert_, 1, cap.id) || !bind_text(insert_, 2, id) ||
        sqlite3_bind_blob64(insert_, 3, body.empty() ? "" : body.data(), body.size(), SQLITE_STATIC) !=
            SQLITE_OK ||
        sqlite3_bind_int64(insert_, 4, now().count()) != SQLITE_OK)
      return internal("bind");
    if (sqlite3_step(insert_) != SQLITE_DONE) return internal("send");
    return id;
  }();
  if (result.ok() && !exec("COMMIT")) result = internal("commit");
  if (!result.ok()) exec("ROLLBACK");
  return result;
}

StoreResult<std::optional<QueueMessage>> QueueStore::receive(const QueueCapability& cap,
                                                             std::chrono::milliseconds visibility) {
  if (visibility.count() < 1 || visibility > kMaxVisibility)
    return store_fail(StoreError::kBadRequest,
                      "visibility timeout is 1 ms to " + std::to_string(kMaxVisibility.count()) + " ms");
  std::lock_guard lock(mutex_);
  if (!exec("BEGIN IMMEDIATE")) return internal("begin");
  auto result = [&]() -> StoreResult<std::optional<QueueMessage>> {
    const int64_t t = now().count();
    QueueMessage m;
    int64_t seq = 0;
    {
      StatementReset r(next_);
      if (!bind_text(next_, 1, cap.id) || sqlite3_bind_int64(next_, 2, t) != SQLITE_OK)
        return internal("bind");
      const int rc = sqlite3_step(next_);
      if (rc == SQLITE_DONE) return std::optional<QueueMessage>{};
      if (rc != SQLITE_ROW) return internal("receive");
      seq = sqlite3_column_int64(next_, 0);
      m.id = column_text(next_, 1);
      m.body = column_text(next_, 2);
      m.deliveries = static_cast<uint32_t>(sqlite3_column_int64(next_, 3)) + 1;
    }
    m.receipt = random_hex();
    if (m.receipt.empty()) return store_fail(StoreError::kInternal, "queue store: getrandom failed");
    StatementReset r(hide_);
    if (sqlite3_bind_int64(hide_, 1, seq) != SQLITE_OK ||
        sqlite3_bind_int64(hide_, 2, t + visibility.count()) != SQLITE_OK || !bind_text(hide_, 3, m.receipt))
      return internal("bind");
    if (sqlite3_step(hide_) != SQLITE_DONE) return internal("hide");
    return std::optional<QueueMessage>(std::move(m));
  }();
  if (result.ok() && !exec("COMMIT")) result = internal("commit");
  if (!result.ok()) exec("ROLLBACK");
  return result;
}

StoreStatus QueueStore::ack(const QueueCapability& cap, std::string_view receipt) {
  std::lock_guard lock(mutex_);
  StatementReset r(ack_);
  if (!bind_text(ack_, 1, cap.id) || !bind_text(ack_, 2, receipt) ||
      sqlite3_bind_int64(ack_, 3, now().count()) != SQLITE_OK)
    return internal("bind");
  if (sqlite3_step(ack_) != SQLITE_DONE) return internal("ack");
  if (sqlite3_changes64(db_) == 0)
    return store_fail(StoreError::kNotFound, "no such delivery (acked, expired or redelivered)");
  return Done{};
}

StoreResult<uint64_t> QueueStore::erase_capability(std::string_view cap_id) {
  std::lock_guard lock(mutex_);
  StatementReset r(erase_all_);
  if (!bind_text(erase_all_, 1, cap_id)) return internal("bind");
  if (sqlite3_step(erase_all_) != SQLITE_DONE) return internal("erase");
  return static_cast<uint64_t>(sqlite3_changes64(db_));
}

}  // namespace zn::broker
