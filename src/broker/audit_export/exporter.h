// One sink's exporter (issue 16): a thread that reads the audit store from
// the sink's cursor (the store is the spool: nothing is copied), takes the
// records the sink's filter admits, formats them, seals the batch and hands
// it to the sink; on success the cursor moves on, on failure the same batch
// is retried with exponential backoff (or after the receiver's Retry-After).
//
// It never blocks enforcement: it only reads the store, through its own
// read-only connection (WAL: readers never hold the writer up), and the data
// path never waits for it. A sink that falls more than spool_max_records
// behind the chain head loses the oldest: they are skipped for it, counted,
// reported through on_drop (zerod audits audit:dropped) and declared in the
// next seal, so receivers see a signed gap rather than a silent one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "broker/audit/store.h"
#include "broker/audit_export/batch_seal.h"
#include "broker/audit_export/export_cursor.h"
#include "broker/audit_export/export_settings.h"
#include "broker/audit_export/sink.h"

namespace zn::broker::audit_export {

struct ExporterStats {
  uint64_t delivered_records = 0;
  uint64_t delivered_batches = 0;
  uint64_t failures = 0;         // delivery attempts that failed
  uint64_t dropped_records = 0;  // skipped because the spool bound was passed
  uint64_t backlog = 0;          // records after consumed_seq (at the last look)
  uint64_t consumed_seq = 0;     // every seq up to here is delivered or left out by the filter
  uint64_t last_delivered_seq = 0;
  bool up = false;         // the last delivery attempt succeeded
  std::string last_error;  // of the last failed attempt (no secrets: the sinks' messages carry none)
};

class AuditExporter {
 public:
  // Called on the exporter's thread when records were dropped for the sink:
  // the sink name, the range. zerod posts audit:dropped.
  using DropReport = std::function<void(const std::string& sink, const DroppedRange& range)>;

  struct Options {
    ExportSettings settings;
    std::string db_path;                   // the audit store (read-only here)
    std::string cursor_path;               // <state_dir>/audit-export/<name>.cursor
    std::string host;                      // for the OCSF shape
    std::chrono::milliseconds poll{1000};  // looks at the store at least this often
  };

  // Loads the cursor (a new sink starts at the chain head). Throws
  // std::runtime_error if the store or the cursor cannot be read. The
  // thread starts here.
  AuditExporter(Options options, std::unique_ptr<AuditSink> sink, std::shared_ptr<const BatchSealer> sealer,
                DropReport on_drop);
  // Stops the thread (waits for a delivery in flight: the sinks time out).
  ~AuditExporter();
  AuditExporter(const AuditExporter&) = delete;
  AuditExporter& operator=(const AuditExporter&) = delete;

  // New records were committed: look now rather than at the next poll. Any thread; never blocks.
  void notify();
  // Waits until every record committed before the call is delivered (or the
  // timeout passes: false). For tests and an orderly stop.
  bool drain(std::chrono::milliseconds timeout);

  ExporterStats stats() const;
  const std::string& name() const { return options_.settings.name; }

 private:
  struct Pending;  // a built batch waiting to be delivered
  void run();
  // One step: read, build and deliver at most one batch. Returns true if it
  // did something (look again at once), false when there is nothing to do.
  bool step(AuditStore& store);
  void apply_spool_bound(uint64_t head);
  void build_pending();
  void publish(uint64_t head);                 // stats_ and consumed_to_ from the thread's state
  bool wait_for(std::chrono::milliseconds d);  // false when stopping

  Options options_;
  std::unique_ptr<AuditSink> sink_;
  std::shared_ptr<const BatchSealer> sealer_;
  DropReport on_drop_;

  // The exporter thread's: the range the next seal covers starts at
  // cursor_.range_start; records up to next_read_ - 1 have been read, and
  // those the filter admitted wait in range_records_ (at most batch_max).
  ExportCursor cursor_;
  uint64_t next_read_ = 1;
  std::vector<AuditRecord> range_records_;
  uint64_t range_last_seq_ = 0;
  std::string range_last_hash_;
  std::optional<std::chrono::steady_clock::time_point>
      range_since_;  // when the open range got its first record
  // The batch being retried; kept across attempts so a retry resends exactly it.
  std::unique_ptr<Pending> pending_;
  int failures_in_row_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poked_ = false;
  ExporterStats stats_;
  uint64_t consumed_to_ = 0;  // every seq up to here is delivered or filtered out (for drain)
  std::condition_variable delivered_cv_;
  std::thread thread_;  // last
};

}  // namespace zn::broker::audit_export
