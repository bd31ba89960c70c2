// The audit trail: validates an event, redacts registered secrets, chains it
// (audit_chain.h), stores it durably (audit_store.h) and emits one JSON line.
//
// Durability. One writer thread, owned by the log, commits whatever is queued
// (up to AuditLogOptions::max_batch records per transaction, one fsync) and
// then hands the lines to the sink in seq order. append() returns once its
// own record is durable; post() returns at once, and its record is durable
// when the writer's next commit ends (normally within one fsync of the post,
// plus AuditLogOptions::gather while records keep coming and nobody waits).
// A crash can lose records posted but not yet committed (at most
// queue_limit). The chain is never broken: a commit is one whole transaction,
// and a failed one stores nothing and leaves the chain head where it was.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "broker/audit/chain.h"
#include "broker/audit/event.h"
#include "broker/audit/redact.h"
#include "broker/audit/secrets.h"
#include "broker/audit/store.h"

namespace zn::broker {

struct AuditLogOptions {
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  using LineSink = std::function<void(const std::string& line)>;

  std::string db_path;  // SQLite file; created if missing, chain continued if present
  Clock clock;          // default: std::chrono::system_clock::now
  LineSink sink;        // default: the line plus '\n' to stdout, flushed
  // Once a batch's lines have all gone to the sink (one flush of a buffered
  // sink per batch, not per record). Exceptions are ignored, as the sink's.
  std::function<void()> batch_done;
  // Records accepted but not yet committed, at most; past it post() refuses.
  size_t queue_limit = 100000;
  // admits() is false from this many records not yet committed.
  size_t high_water = 50000;
  // Records per transaction, at most.
  size_t max_batch = 512;
  // Group commit: while records keep coming (the last commit ended less
  // than this long ago), the writer lets them gather this long before its
  // next transaction instead of committing each handful: a commit (BEGIN,
  // the WAL's frames, an fdatasync) costs as much as dozens of inserts. A
  // record after a quiet spell is committed at once, and so is the queue as
  // soon as an append() or flush() waits on it (nobody waits out a gather).
  // 0: commit whatever is queued as soon as the last commit ends.
  // Measured (audit_post_bench, audit_writer_steady): the writer's CPU per
  // record at 9 records/ms went 22.5 -> 15.5 us from 2 to 10 ms, at 2/ms
  // 60 -> 39 us; a posted record becomes durable up to this much later.
  std::chrono::microseconds gather{10000};
  // After a failed commit the writer waits this long before retrying,
  // doubling up to retry_backoff_max while commits keep failing.
  std::chrono::milliseconds retry_backoff{100};
  std::chrono::milliseconds retry_backoff_max{2000};
  // Tests only: called on the writer thread before each commit attempt. It
  // may sleep (a slow disk) or throw (the commit fails, nothing is stored).
  std::function<void()> before_commit;
};

struct AuditLogStats {
  uint64_t queued = 0;                               // accepted, not yet committed (now)
  uint64_t committed = 0;                            // records this log has committed
  uint64_t batches = 0;                              // transactions committed
  uint64_t rejected = 0;                             // post() refusals: the queue was at queue_limit
  uint64_t failed_commits = 0;                       // commit attempts that failed (each retry counts)
  bool failing = false;                              // the last commit attempt failed
  std::chrono::microseconds last_commit_latency{0};  // of the last commit attempt
  std::chrono::microseconds max_commit_latency{0};
  // Alarms given to the log (posted or appended, recorded or not): what an
  // alert watches (zn_secret_alarms_total).
  uint64_t secret_canary = 0;     // secret:canary: a planted fake credential in egress
  uint64_t secret_misuse = 0;     // secret:misuse: a placeholder headed elsewhere
  uint64_t secret_reflected = 0;  // secret:reflected: an upstream echoed an injected credential
  // Secret values the redaction holds (daemon-wide and the sessions').
  uint64_t secrets_held = 0;
};

class AuditLog {
 public:
  // Opens the store and starts the writer. Throws std::runtime_error if the
  // store cannot be opened, std::invalid_argument on inconsistent limits.
  explicit AuditLog(AuditLogOptions opts);
  // Drains: every record accepted before (posted or appended) is committed
  // before it returns. If a commit fails now, it is not retried: what is still
  // queued is lost, and the loss is reported on stderr. No call may be in
  // flight.
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // For the control plane: blocks on the disk. Thread-safe. Validates
  // (std::invalid_argument, nothing queued), redacts, queues and waits until
  // the writer has committed it; then returns the stored record (its line
  // already handed to the sink; a throwing sink is ignored: the record is
  // durable). A failed commit is retried, this record with it, so while the
  // store is broken this waits: check admits() first to answer at once.
  // Not limited by queue_limit: each caller waits for its own record.
  AuditRecord append(AuditEvent ev);

  // For the data path: never waits on the disk. Thread-safe. Validates
  // (std::invalid_argument, as append), redacts and queues; returns true once
  // queued. An event with detail_later is checked here for its name and sid
  // only; its detail is built, checked and redacted by the writer, and one
  // that cannot be recorded (not an object, too large, invalid UTF-8) is
  // recorded as {"unrecordable": why}: the crossing is never lost.
  // Returns false, and counts it in stats().rejected, if queue_limit records
  // are already waiting: the event is then NOT recorded. A commit that fails
  // keeps its records queued, in order, and retries them.
  bool post(AuditEvent ev);

  // Never blocks; any thread. False when the log should not be given new
  // crossings: high_water records are waiting, or the last commit failed
  // (the store is broken, e.g. the disk is full). A caller that must not let
  // a crossing through unaudited refuses it when this is false.
  bool admits() const;

  // Thread-safe; never waits on the disk.
  AuditLogStats stats() const;

  // Waits until every record accepted before the call is committed, or the
  // timeout passes (false). For readers that must see what the data path
  // just posted: the control plane's audit queries, tests.
  bool flush(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Thread-safe. Returns false if not accepted (< 8 bytes or invalid UTF-8).
  // Applies to events appended or posted afterwards; kept in memory only,
  // never logged. Redacted from every record.
  bool add_secret(std::string value);
  // A session's own secrets (its resources' values), redacted from its
  // records (and from records of no session), replacing what it had; how
  // many were accepted. Applies to events posted afterwards; a record
  // posted before is redacted with what its session had then.
  size_t set_session_secrets(const std::string& sid, const std::vector<std::string>& values);
  // The session is gone: its secrets are forgotten (secrets.h).
  void forget_session_secrets(const std::string& sid);

  // Thread-safe (waits for a commit in flight). Committed records only,
  // oldest first. std::invalid_argument on a bad query.
  std::vector<AuditRecord> query(const AuditQuery& q);

  // Thread-safe (waits for a commit in flight). Verifies the whole chain in
  // this log's file.
  AuditVerifyResult verify();

  // Retention (issue 16), from zerod's retention thread: deletes records
  // up to seq in one transaction and leaves a checkpoint (AuditStore::
  // prune_through). Holds the store for that transaction: callers prune in
  // chunks so the writer waits at most one.
  uint64_t prune_through(uint64_t seq, const AuditStore::CheckpointFn& make);
  // What retention decides from: the lowest and highest seq, and the last
  // seq <= max_seq older than `before` (0 if none; "" skips the age).
  struct RetentionView {
    uint64_t first = 0, head = 0, last_before = 0;
  };
  RetentionView retention_view(const std::string& before, uint64_t max_seq);
  std::optional<AuditCheckpoint> checkpoint();

  // Verifies a chain file opened read-only (for znctl; never creates or
  // writes the file). Throws std::runtime_error if it cannot be read as an
  // audit store; chain defects are reported in the result.
  static AuditVerifyResult verify_file(const std::string& path);

 private:
  void count_alarm_locked(const std::string& event);
  struct Waiter;
  struct Item {  // an accepted record, redacted, before the store numbers it
    std::string event;
    std::string sid;
    nlohmann::json detail;
    std::string detail_json;  // detail serialised, once
    // A post()'s detail not built yet (AuditEvent::detail_later): until the
    // writer takes it, the sid is not redacted either (memory only; the store
    // and the lines never see it unredacted). Redacted then with the
    // session's secrets as they were when it was posted.
    std::function<nlohmann::json()> detail_later;
    std::shared_ptr<const AuditRedactor> redactor;
    std::chrono::system_clock::time_point ts;  // when accepted
    Waiter* waiter = nullptr;                  // append()'s, or none for post()
  };

  static AuditVerifyResult verify_store(AuditStore& store);
  Item make_item(AuditEvent ev) const;
  // Redacts with the secrets registered now and fills the item's record.
  static void fill_item(Item& it, const AuditRedactor& red, nlohmann::json detail, std::string detail_json,
                        std::string sid);
  // On the writer: builds a deferred detail (Item::detail_later).
  static void build_later(Item& it);
  void writer_loop();
  // Commits one batch under store_mu_; the error, if it failed.
  std::exception_ptr commit(std::vector<Item>& batch, std::vector<AuditRecord>& recs);
  void publish_pending_locked();

  AuditLogOptions opts_;

  AuditSecrets secrets_;  // hands each record its session's redactor

  std::mutex store_mu_;  // the store's one connection: the writer's commit, query, verify
  std::unique_ptr<AuditStore> store_;

  mutable std::mutex mu_;            // the queue and the counters; never held across I/O
  std::condition_variable work_;     // the writer: something queued, or stop
  std::condition_variable settled_;  // append(): a batch has settled
  std::deque<Item> queue_;           // accepted, not taken by the writer, oldest first
  size_t in_flight_ = 0;             // taken by the writer, not yet settled
  // When the writer last finished a commit attempt (gather: records keep coming).
  std::chrono::steady_clock::time_point last_commit_end_{};
  uint64_t accepted_ = 0;  // records ever queued (stats_.committed catches up)
  size_t hurry_ = 0;       // append()s and flush()es waiting: the gather ends at once
  bool stopping_ = false;
  AuditLogStats stats_;
  std::atomic<size_t> pending_{0};    // queue_ + in_flight_, for admits()
  std::atomic<bool> failing_{false};  // the last commit attempt failed

  std::thread writer_;  // last: started once everything above is ready
};

}  // namespace zn::broker
