#include "broker/audit/log.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/thread_name.h"

namespace zn::broker {

namespace {

void stdout_sink(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

struct AuditLog::Waiter {
  AuditRecord rec;
  std::exception_ptr error;
  bool done = false;
};

AuditLog::AuditLog(AuditLogOptions opts) : opts_(std::move(opts)) {
  if (opts_.max_batch == 0 || opts_.high_water == 0 || opts_.high_water > opts_.queue_limit)
    throw std::invalid_argument("audit log: need 0 < max_batch and 0 < high_water <= queue_limit");
  if (!opts_.clock) opts_.clock = [] { return std::chrono::system_clock::now(); };
  if (!opts_.sink) opts_.sink = stdout_sink;
  store_ = std::make_unique<AuditStore>(opts_.db_path, AuditStore::Mode::kReadWrite);
  writer_ = std::thread([this] {
    set_thread_name("zn-audit");
    writer_loop();
  });
}

AuditLog::~AuditLog() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  writer_.join();
}

bool AuditLog::add_secret(std::string value) { return secrets_.add(std::move(value)); }

size_t AuditLog::set_session_secrets(const std::string& sid, const std::vector<std::string>& values) {
  return secrets_.set_session(sid, values);
}

void AuditLog::forget_session_secrets(const std::string& sid) { secrets_.forget_session(sid); }

AuditLog::Item AuditLog::make_item(AuditEvent ev) const {
  Item it;
  if (ev.detail_later) {
    validate_audit_head(ev.event, ev.sid);  // throws, nothing queued
    it.redactor = secrets_.for_record(ev.sid);
    it.event = std::move(ev.event);
    it.sid = std::move(ev.sid);
    it.detail_later = std::move(ev.detail_later);
    return it;
  }
  std::string detail_json;
  validate_audit_event(ev, &detail_json);  // throws, nothing queued
  it.event = std::move(ev.event);
  // Redacted on the caller's thread, with the secrets known now: the queue,
  // and the store, never hold a registered secret.
  const std::shared_ptr<const AuditRedactor> red = secrets_.for_record(ev.sid);
  fill_item(it, *red, std::move(ev.detail), std::move(detail_json), std::move(ev.sid));
  return it;
}

void AuditLog::fill_item(Item& it, const AuditRedactor& red, nlohmann::json detail, std::string detail_json,
                         std::string sid) {
  it.detail = std::move(detail);
  if (red.empty()) {
    it.sid = std::move(sid);
    it.detail_json = std::move(detail_json);
    return;
  }
  it.detail_json = red.redact_in_place(it.detail) ? it.detail.dump() : std::move(detail_json);
  it.sid = red.redact(sid);
  // "[redacted]" is longer than an 8-byte secret, so a near-limit sid can grow.
  if (it.sid.size() > kAuditMaxSidLen) it.sid = AuditRedactor::kMarker;
}

void AuditLog::build_later(Item& it) {
  const std::function<nlohmann::json()> build = std::move(it.detail_later);
  const std::shared_ptr<const AuditRedactor> red = std::move(it.redactor);
  it.detail_later = nullptr;
  it.redactor = nullptr;
  nlohmann::json detail;
  std::string detail_json;
  try {
    detail = build();
    validate_audit_detail(detail, &detail_json);
  } catch (const std::exception& e) {
    // A bug in the builder, or bytes that are not text: the crossing is
    // still recorded, with why its detail is not (no part of it: a
    // half-built detail could hold what redaction would not have matched).
    std::string why = e.what();
    for (char& c : why)  // printable ASCII: nothing that cannot be serialised
      if (c < 0x20 || c > 0x7e) c = '?';
    detail = {{"unrecordable", why}};
    detail_json = detail.dump();
  }
  fill_item(it, *red, std::move(detail), std::move(detail_json), std::move(it.sid));
}

void AuditLog::publish_pending_locked() {
  pending_.store(queue_.size() + in_flight_, std::memory_order_relaxed);
}

void AuditLog::count_alarm_locked(const std::string& event) {
  if (event.rfind("secret:", 0) != 0) return;
  if (event == "secret:canary") ++stats_.secret_canary;
  if (event == "secret:misuse") ++stats_.secret_misuse;
  if (event == "secret:reflected") ++stats_.secret_reflected;
}

bool AuditLog::post(AuditEvent ev) {
  Item it = make_item(std::move(ev));
  {
    std::lock_guard lk(mu_);
    count_alarm_locked(it.event);  // counted even when the queue refuses it
    if (queue_.size() + in_flight_ >= opts_.queue_limit) {
      ++stats_.rejected;
      return false;
    }
    it.ts = opts_.clock();  // under the lock: queue order is time order
    queue_.push_back(std::move(it));
    ++accepted_;
    publish_pending_locked();
    // The writer only sleeps on an empty queue (or in a backoff, which a new
    // record must not cut short).
    if (queue_.size() > 1) return true;
  }
  work_.notify_one();
  return true;
}

AuditRecord AuditLog::append(AuditEvent ev) {
  Item it = make_item(std::move(ev));
  Waiter mine;
  it.waiter = &mine;
  std::unique_lock lk(mu_);
  count_alarm_locked(it.event);
  it.ts = opts_.clock();
  queue_.push_back(std::move(it));
  ++accepted_;
  publish_pending_locked();
  // Always woken: the writer may be gathering, and this caller waits.
  ++hurry_;
  work_.notify_one();
  settled_.wait(lk, [&] { return mine.done; });
  --hurry_;
  if (mine.error) std::rethrow_exception(mine.error);
  return std::move(mine.rec);
}

bool AuditLog::flush(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  const uint64_t target = accepted_;
  ++hurry_;
  work_.notify_one();
  const bool done = settled_.wait_for(lk, timeout, [&] { return stats_.committed >= target; });
  --hurry_;
  return done;
}

bool AuditLog::admits() const {
  return !failing_.load(std::memory_order_relaxed) &&
         pending_.load(std::memory_order_relaxed) < opts_.high_water;
}

AuditLogStats AuditLog::stats() const {
  std::lock_guard lk(mu_);
  AuditLogStats s = stats_;
  s.queued = queue_.size() + in_flight_;
  s.secrets_held = secrets_.count();
  return s;
}

std::exception_ptr AuditLog::commit(std::vector<Item>& batch, std::vector<AuditRecord>& recs) {
  std::vector<AuditStore::BuildFn> builds;
  builds.reserve(batch.size());
  for (const Item& it : batch)
    builds.push_back([&it](uint64_t last_seq, const std::string& last_hash) {
      AuditRecord r;
      r.seq = last_seq + 1;
      r.ts = format_audit_ts(it.ts);
      r.event = it.event;
      r.sid = it.sid;
      r.detail_json = it.detail_json;
      // The object itself only for append()'s caller; the hash, the store
      // and the line use the serialised form.
      if (it.waiter) r.detail = it.detail;
      r.prev = last_hash;
      r.hash = audit_chain_hash(r.prev, r);
      return r;
    });
  std::lock_guard sl(store_mu_);
  try {
    if (opts_.before_commit) opts_.before_commit();
    // The store reads the chain head inside the transaction and rolls back
    // on any failure, so a failed attempt leaves the chain as it was and the
    // retry numbers the same records from the same head.
    recs = store_->append_batch(builds);
    return nullptr;
  } catch (...) {
    return std::current_exception();
  }
}

void AuditLog::writer_loop() {
  using std::chrono::steady_clock;
  std::chrono::milliseconds backoff{0};
  std::unique_lock lk(mu_);
  for (;;) {
    if (backoff.count() > 0) work_.wait_for(lk, backoff, [&] { return stopping_; });
    work_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, drained
    // Under a steady stream, more records per transaction (options: gather).
    // post() notifies only an empty queue's first record, so the wait is
    // not woken per record.
    if (opts_.gather.count() > 0 && queue_.size() < opts_.max_batch && hurry_ == 0 &&
        steady_clock::now() - last_commit_end_ < opts_.gather)
      work_.wait_for(lk, opts_.gather,
                     [&] { return stopping_ || hurry_ > 0 || queue_.size() >= opts_.max_batch; });

    const size_t n = std::min(queue_.size(), opts_.max_batch);
    std::vector<Item> batch;
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    in_flight_ = n;
    lk.unlock();
    // The data path's details, built here rather than on its loops (a retried
    // batch's are built already).
    for (Item& it : batch)
      if (it.detail_later) build_later(it);

    std::vector<AuditRecord> recs;
    const auto t0 = steady_clock::now();
    std::exception_ptr error = commit(batch, recs);
    const auto latency = std::chrono::duration_cast<std::chrono::microseconds>(steady_clock::now() - t0);
    // Lines after the commit, in seq order (one writer), before any waiter
    // wakes: an append's line is out when it returns.
    for (const AuditRecord& r : recs) {
      try {
        opts_.sink(r.json_line());
      } catch (...) {
        // The record is committed; reporting failure would invite a retry
        // and a duplicate record. The store remains the source of truth.
      }
    }
    if (!recs.empty() && opts_.batch_done) {
      try {
        opts_.batch_done();
      } catch (...) {
      }
    }

    lk.lock();
    last_commit_end_ = steady_clock::now();
    in_flight_ = 0;
    stats_.last_commit_latency = latency;
    stats_.max_commit_latency = std::max(stats_.max_commit_latency, latency);
    if (!error) {
      for (size_t i = 0; i < n; ++i)
        if (Waiter* w = batch[i].waiter) {
          w->rec = std::move(recs[i]);
          w->done = true;
        }
      stats_.committed += n;
      ++stats_.batches;
      stats_.failing = false;
      backoff = std::chrono::milliseconds{0};
    } else {
      ++stats_.failed_commits;
      stats_.failing = true;
      // Everything goes back to the front, in order, and is retried: an
      // accepted record is never dropped, and a failing log always has work
      // to retry, so it recovers by itself once the store does.
      for (auto it = batch.rbegin(); it != batch.rend(); ++it) queue_.push_front(std::move(*it));
      backoff = backoff.count() == 0 ? opts_.retry_backoff : std::min(backoff * 2, opts_.retry_backoff_max);
      if (stopping_) {
        // No retry at shutdown: a broken store would hold the destructor
        // forever. What is still queued is lost.
        size_t lost = 0;
        for (Item& it : queue_) {
          if (Waiter* w = it.waiter) {
            w->error = error;
            w->done = true;
          } else {
            ++lost;
          }
        }
        queue_.clear();
        if (lost)
          std::fprintf(stderr, "audit: %zu posted record(s) lost at shutdown: %s\n", lost,
                       error_text(error).c_str());
      }
    }
    failing_.store(stats_.failing, std::memory_order_relaxed);
    publish_pending_locked();
    settled_.notify_all();
    // Freed without holding up post(): a batch is up to max_batch details.
    lk.unlock();
    batch.clear();
    recs.clear();
    lk.lock();
  }
}

std::vector<AuditRecord> AuditLog::query(const AuditQuery& q) {
  std::lock_guard sl(store_mu_);
  return store_->query(q);
}

AuditVerifyResult AuditLog::verify_store(AuditStore& store) {
  const std::optional<AuditCheckpoint> cp = store.checkpoint();
  AuditChainVerifier v = cp ? AuditChainVerifier(cp->seq, cp->hash) : AuditChainVerifier();
  store.for_each_raw([&](const AuditRawRow& row) { return v.feed(row); });
  AuditVerifyResult r = v.result();
  if (cp) r.checkpoint_seq = cp->seq;
  return r;
}

uint64_t AuditLog::prune_through(uint64_t seq, const AuditStore::CheckpointFn& make) {
  std::lock_guard sl(store_mu_);
  return store_->prune_through(seq, make);
}

AuditLog::RetentionView AuditLog::retention_view(const std::string& before, uint64_t max_seq) {
  std::lock_guard sl(store_mu_);
  RetentionView v;
  v.first = store_->first_seq();
  v.head = store_->head().seq;
  v.last_before = before.empty() ? 0 : store_->last_seq_before(before, std::min(max_seq, v.head));
  return v;
}

std::optional<AuditCheckpoint> AuditLog::checkpoint() {
  std::lock_guard sl(store_mu_);
  return store_->checkpoint();
}

AuditVerifyResult AuditLog::verify() {
  std::lock_guard sl(store_mu_);
  return verify_store(*store_);
}

AuditVerifyResult AuditLog::verify_file(const std::string& path) {
  AuditStore store(path, AuditStore::Mode::kReadOnly);
  return verify_store(store);
}

}  // namespace zn::broker
