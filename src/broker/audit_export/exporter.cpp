#include "broker/audit_export/exporter.h"
#include "common/thread_name.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace zn::broker::audit_export {

struct AuditExporter::Pending {
  ExportBatch batch;
};

AuditExporter::AuditExporter(Options options, std::unique_ptr<AuditSink> sink,
                             std::shared_ptr<const BatchSealer> sealer, DropReport on_drop)
    : options_(std::move(options)),
      sink_(std::move(sink)),
      sealer_(std::move(sealer)),
      on_drop_(std::move(on_drop)) {
  if (!sink_ || !sealer_) throw std::invalid_argument("audit exporter: no sink or sealer");
  uint64_t head = 0;
  {
    AuditStore store(options_.db_path, AuditStore::Mode::kReadOnly);
    head = store.head().seq;
  }
  cursor_ = load_export_cursor(options_.cursor_path, head + 1);
  next_read_ = cursor_.read_from;
  consumed_to_ = cursor_.range_start - 1;
  stats_.last_delivered_seq = cursor_.range_start - 1;
  thread_ = std::thread([this] {
    set_thread_name("zn-export");
    run();
  });
}

AuditExporter::~AuditExporter() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sink_->close();
}

void AuditExporter::notify() {
  {
    std::lock_guard lk(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

bool AuditExporter::wait_for(std::chrono::milliseconds d) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, d, [this] { return stop_ || poked_; });
  poked_ = false;
  return !stop_;
}

bool AuditExporter::drain(std::chrono::milliseconds timeout) {
  uint64_t target = 0;
  {
    AuditStore store(options_.db_path, AuditStore::Mode::kReadOnly);
    target = store.head().seq;
  }
  notify();
  std::unique_lock lk(mu_);
  return delivered_cv_.wait_for(lk, timeout, [&] { return consumed_to_ >= target; });
}

ExporterStats AuditExporter::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void AuditExporter::run() {
  std::unique_ptr<AuditStore> store;
  while (true) {
    bool busy = false;
    std::chrono::milliseconds wait = options_.poll;
    try {
      if (!store) store = std::make_unique<AuditStore>(options_.db_path, AuditStore::Mode::kReadOnly);
      busy = step(*store);
    } catch (const SinkError& e) {
      // step() handles delivery failures itself; this is a belt.
      std::lock_guard lk(mu_);
      stats_.last_error = e.what();
    } catch (const std::exception& e) {
      // The store or the cursor file: log it, drop the connection and retry.
      spdlog::error("audit export {}: {}", options_.settings.name, e.what());
      {
        std::lock_guard lk(mu_);
        stats_.last_error = e.what();
      }
      store.reset();
      wait = options_.settings.backoff_initial;
    }
    {
      std::lock_guard lk(mu_);
      if (stop_) return;
      if (busy) continue;
    }
    // A batch lingering for more records is looked at again when its time is up.
    if (!range_records_.empty()) wait = std::min(wait, options_.settings.linger);
    if (!wait_for(wait)) return;
  }
}

void AuditExporter::publish(uint64_t head) {
  std::lock_guard lk(mu_);
  const bool open_range = pending_ || !range_records_.empty();
  consumed_to_ = open_range ? cursor_.range_start - 1 : next_read_ - 1;
  // Records neither delivered nor passed over by the filter.
  stats_.backlog = head > consumed_to_ ? head - consumed_to_ : 0;
  stats_.consumed_seq = consumed_to_;
  stats_.last_delivered_seq = cursor_.range_start - 1;
  delivered_cv_.notify_all();
}

void AuditExporter::apply_spool_bound(uint64_t head) {
  const uint64_t max = options_.settings.spool_max_records;
  if (head < next_read_ || head - (next_read_ - 1) <= max) return;
  // Everything not yet delivered up to the new read position goes: a drop
  // always starts at the open range's start, so one seal declares it whole.
  const uint64_t new_read = head - max + 1;
  const DroppedRange next{cursor_.range_start, new_read - 1};
  const uint64_t before = cursor_.dropped ? cursor_.dropped->count() : 0;
  const DroppedRange fresh{cursor_.dropped ? cursor_.dropped->last + 1 : next.first, next.last};
  cursor_.dropped = next;
  cursor_.read_from = new_read;
  next_read_ = new_read;
  pending_.reset();
  range_records_.clear();
  range_last_seq_ = 0;
  range_since_.reset();
  save_export_cursor(options_.cursor_path, cursor_);
  {
    std::lock_guard lk(mu_);
    stats_.dropped_records += next.count() - before;
  }
  spdlog::warn("audit export {}: {} records behind (spool_max_records {}): dropped seqs {}..{}",
               options_.settings.name, head - (cursor_.range_start - 1), max, fresh.first, fresh.last);
  if (on_drop_) on_drop_(options_.settings.name, fresh);
}

void AuditExporter::build_pending() {
  auto p = std::make_unique<Pending>();
  ExportBatch& b = p->batch;
  b.first_seq = cursor_.range_start;
  b.last_seq = range_last_seq_;
  b.records = std::move(range_records_);
  range_records_.clear();
  b.lines.reserve(b.records.size());
  for (const AuditRecord& r : b.records)
    b.lines.push_back(format_record(r, options_.settings.format, options_.host));
  b.seal_line = sealer_->seal(b.first_seq, b.last_seq, range_last_hash_, b.records, cursor_.dropped);
  pending_ = std::move(p);
}

bool AuditExporter::step(AuditStore& store) {
  const uint64_t head = store.head().seq;
  if (!pending_) {
    apply_spool_bound(head);
    bool caught_up = true;
    if (next_read_ <= head) {
      AuditQuery q;
      q.after_seq = next_read_ - 1;
      q.limit = options_.settings.batch_max;
      const std::vector<AuditRecord> recs = store.query(q);
      caught_up = recs.size() < q.limit;
      if (!recs.empty() && recs.front().seq > next_read_) {
        // Pruned by retention before this sink read them: a drop like any other.
        // As in apply_spool_bound, the drop takes the whole open range with it.
        const DroppedRange gone{next_read_, recs.front().seq - 1};
        cursor_.dropped = DroppedRange{cursor_.range_start, gone.last};
        range_records_.clear();
        {
          std::lock_guard lk(mu_);
          stats_.dropped_records += gone.count();
        }
        spdlog::warn("audit export {}: seqs {}..{} were pruned before it read them", options_.settings.name,
                     gone.first, gone.last);
        if (on_drop_) on_drop_(options_.settings.name, gone);
      }
      for (const AuditRecord& r : recs) {
        if (options_.settings.filter.admits(r)) range_records_.push_back(r);
        range_last_seq_ = r.seq;
        range_last_hash_ = r.hash;
        next_read_ = r.seq + 1;
        if (range_records_.size() >= options_.settings.batch_max) {
          caught_up = false;
          break;
        }
      }
      if (!recs.empty() && !range_since_) range_since_ = std::chrono::steady_clock::now();
    }
    const bool range_open = range_last_seq_ >= cursor_.range_start;
    const bool idle_due = range_open && range_since_ &&
                          std::chrono::steady_clock::now() - *range_since_ >= options_.settings.idle_seal;
    const bool full = range_records_.size() >= options_.settings.batch_max;
    const bool lingered =
        range_since_ && std::chrono::steady_clock::now() - *range_since_ >= options_.settings.linger;
    if (range_open &&
        (full || cursor_.dropped || idle_due || (caught_up && !range_records_.empty() && lingered))) {
      build_pending();
    } else {
      publish(head);
      return !caught_up;
    }
  }

  try {
    sink_->deliver(pending_->batch);
  } catch (const SinkError& e) {
    ++failures_in_row_;
    {
      std::lock_guard lk(mu_);
      ++stats_.failures;
      stats_.up = false;
      stats_.last_error = e.what();
    }
    if (failures_in_row_ == 1 || failures_in_row_ % 10 == 0)
      spdlog::warn("audit export {}: delivery failed ({} in a row): {}", options_.settings.name,
                   failures_in_row_, e.what());
    publish(head);
    const auto& s = options_.settings;
    auto backoff = s.backoff_initial * (1LL << std::min(failures_in_row_ - 1, 20));
    if (backoff > s.backoff_max) backoff = s.backoff_max;
    if (e.retry_after) backoff = std::min(std::max(*e.retry_after, s.backoff_initial), s.backoff_max);
    const std::chrono::steady_clock::time_point until =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(backoff);
    // Wait out the backoff, but keep the spool bound while waiting.
    while (std::chrono::steady_clock::now() < until) {
      {
        std::unique_lock lk(mu_);
        const std::chrono::steady_clock::time_point next =
            std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.poll);
        cv_.wait_until(lk, std::min(until, next), [this] { return stop_; });
        if (stop_) return false;
      }
      const uint64_t now_head = store.head().seq;
      apply_spool_bound(now_head);
      if (!pending_) return true;  // dropped while down: build anew from the new position
    }
    return true;
  }
  failures_in_row_ = 0;
  const ExportBatch& b = pending_->batch;
  cursor_ = ExportCursor{b.last_seq + 1, b.last_seq + 1, std::nullopt};
  const size_t n = b.records.size();
  pending_.reset();
  range_since_.reset();
  {
    std::lock_guard lk(mu_);
    stats_.delivered_records += n;
    ++stats_.delivered_batches;
    stats_.up = true;
  }
  save_export_cursor(options_.cursor_path, cursor_);
  publish(head);
  return true;
}

}  // namespace zn::broker::audit_export
