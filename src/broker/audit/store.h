// Durable storage of the audit chain: one SQLite database (WAL journal,
// synchronous=FULL), table `audit`, indexes on (sid, ts) and (event, ts).
// Prepared statements only. Not thread-safe: AuditLog serialises access.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "broker/audit/chain.h"
#include "broker/audit/event.h"

struct sqlite3;
struct sqlite3_stmt;

namespace zn::broker {

struct AuditQuery {
  static constexpr size_t kDefaultLimit = 1000;
  static constexpr size_t kMaxLimit = 100000;

  std::optional<std::string> sid;    // exact
  std::optional<std::string> event;  // exact name ("dns:deny") or category prefix ("dns:")
  std::optional<std::chrono::system_clock::time_point> since;  // inclusive (ms precision)
  std::optional<std::chrono::system_clock::time_point> until;  // exclusive (ms precision)
  std::optional<uint64_t> after_seq;                           // seq > after_seq (the exporters' cursor)
  size_t limit = kDefaultLimit;                                // 1..kMaxLimit, else std::invalid_argument
};

// Where retention cut the chain (issue 16): the last pruned record's seq and
// hash, signed by zerod's audit key, so the chain that remains verifies from
// it (the record after it links to `hash`) and a cut nobody signed shows.
struct AuditCheckpoint {
  uint64_t seq = 0;
  std::string hash;
  std::string ts;   // when the cut was made
  std::string kid;  // the signing key's id
  std::string sig;  // hex Ed25519 over audit_checkpoint_message()
};
// "zeroness/audit-checkpoint/v1\n<seq>:<hash>\n<ts>\n<kid>": what is signed.
std::string audit_checkpoint_message(const AuditCheckpoint& cp);

class AuditStore {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // ReadWrite creates the file and schema if missing. ReadOnly never creates
  // or writes anything. Throws std::runtime_error on failure.
  AuditStore(const std::string& path, Mode mode);
  ~AuditStore();
  AuditStore(const AuditStore&) = delete;
  AuditStore& operator=(const AuditStore&) = delete;

  // In one IMMEDIATE transaction: reads the chain head (last seq and hash, or
  // 0 and the genesis hash), asks `build` for the record to store next, inserts
  // it and commits. Safe against another process appending to the same file.
  // On any failure rolls back and rethrows; nothing is stored.
  using BuildFn = std::function<AuditRecord(uint64_t last_seq, const std::string& last_hash)>;
  AuditRecord append(const BuildFn& build);
  // The same for several records in one transaction (one fsync): each build
  // is given the record before it. All or nothing.
  std::vector<AuditRecord> append_batch(const std::vector<BuildFn>& builds);

  // The last record's seq and hash; 0 and the genesis hash when empty.
  struct Head {
    uint64_t seq = 0;
    std::string hash;
  };
  Head head();

  // Matching records, ascending seq. Throws std::invalid_argument on a bad query.
  std::vector<AuditRecord> query(const AuditQuery& q);

  // The checkpoint retention left, if any.
  std::optional<AuditCheckpoint> checkpoint();
  // The lowest seq stored (0 when empty).
  uint64_t first_seq();
  // The highest seq <= max_seq whose ts is before `before` (RFC 3339, as
  // stored); 0 if none. Scans from the lowest seq (retention's age cut).
  uint64_t last_seq_before(const std::string& before, uint64_t max_seq);
  // Retention: in one transaction, deletes every record with seq <= seq and
  // stores the checkpoint `make` builds from record seq's hash (replacing
  // the one before). seq must be stored. Returns the rows deleted.
  using CheckpointFn = std::function<AuditCheckpoint(uint64_t seq, const std::string& hash)>;
  uint64_t prune_through(uint64_t seq, const CheckpointFn& make);

  // Every row in ascending seq order, unparsed, in one read transaction.
  // Stops when fn returns false.
  void for_each_raw(const std::function<bool(const AuditRawRow&)>& fn);

 private:
  void exec(const char* sql);
  sqlite3_stmt* prepare(const char* sql);

  sqlite3* db_ = nullptr;
  sqlite3_stmt* head_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
};

}  // namespace zn::broker
