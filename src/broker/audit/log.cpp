#include "broker/audit/log.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace zn::broker {

namespace {

void stdout_sink(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

}  // namespace

AuditLog::AuditLog(AuditLogOptions opts) : opts_(std::move(opts)) {
  if (!opts_.clock) opts_.clock = [] { return std::chrono::system_clock::now(); };
  if (!opts_.sink) opts_.sink = stdout_sink;
  store_ = std::make_unique<AuditStore>(opts_.db_path, AuditStore::Mode::kReadWrite);
}

AuditLog::~AuditLog() = default;

bool AuditLog::add_secret(std::string value) {
  std::lock_guard lk(mu_);
  return redactor_.add(std::move(value));
}

struct AuditLog::Pending {
  AuditEvent ev;
  AuditRecord rec;
  std::exception_ptr error;
  bool done = false;
};

AuditRecord AuditLog::append(AuditEvent ev) {
  validate_audit_event(ev);  // before taking the lock: throws, nothing written

  Pending mine{std::move(ev), {}, nullptr, false};
  std::unique_lock lk(mu_);
  queue_.push_back(&mine);
  // Group commit: the first waiter finding no commit in flight becomes the
  // writer for everything queued, so concurrent appends share one fsync.
  // Each caller still returns only once its own record is durable.
  // A writer commits at most kMaxBatch entries, which need not include its
  // own: it then writes again (or another caller does) until its record is
  // done, so no append returns while its record is still queued.
  for (;;) {
    committed_.wait(lk, [&] { return mine.done || !writing_; });
    if (mine.done) break;
    writing_ = true;
    std::vector<Pending*> batch;
    const size_t n = std::min(queue_.size(), kMaxBatch);
    batch.assign(queue_.begin(), queue_.begin() + static_cast<long>(n));
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<long>(n));
    std::vector<AuditStore::BuildFn> builds;
    builds.reserve(batch.size());
    for (Pending* p : batch) {
      // Redacted under the lock: add_secret may change the redactor.
      nlohmann::json detail = redactor_.redact(p->ev.detail);
      std::string sid = redactor_.redact(p->ev.sid);
      // "[redacted]" is longer than an 8-byte secret, so a near-limit sid can grow.
      if (sid.size() > kAuditMaxSidLen) sid = AuditRedactor::kMarker;
      builds.push_back([this, p, detail = std::move(detail), sid = std::move(sid)](
                           uint64_t last_seq, const std::string& last_hash) {
        AuditRecord r;
        r.seq = last_seq + 1;
        r.ts = format_audit_ts(opts_.clock());
        r.event = p->ev.event;
        r.sid = sid;
        r.detail = detail;
        r.prev = last_hash;
        r.hash = audit_chain_hash(r.prev, r);
        return r;
      });
    }
    lk.unlock();
    std::vector<AuditRecord> recs;
    std::exception_ptr error;
    try {
      recs = store_->append_batch(builds);
    } catch (...) {
      error = std::current_exception();
    }
    for (const AuditRecord& r : recs) {
      try {
        opts_.sink(r.json_line());
      } catch (...) {
        // The record is committed; reporting failure would invite a retry
        // and a duplicate record. The store remains the source of truth.
      }
    }
    lk.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (error)
        batch[i]->error = error;
      else
        batch[i]->rec = std::move(recs[i]);
      batch[i]->done = true;
    }
    writing_ = false;
    committed_.notify_all();
  }
  if (mine.error) std::rethrow_exception(mine.error);
  return std::move(mine.rec);
}

std::vector<AuditRecord> AuditLog::query(const AuditQuery& q) {
  // The store's connection is never shared with a commit in flight.
  std::unique_lock lk(mu_);
  committed_.wait(lk, [&] { return !writing_; });
  return store_->query(q);
}

AuditVerifyResult AuditLog::verify_store(AuditStore& store) {
  AuditChainVerifier v;
  store.for_each_raw([&](const AuditRawRow& row) { return v.feed(row); });
  return v.result();
}

AuditVerifyResult AuditLog::verify() {
  std::unique_lock lk(mu_);
  committed_.wait(lk, [&] { return !writing_; });
  return verify_store(*store_);
}

AuditVerifyResult AuditLog::verify_file(const std::string& path) {
  AuditStore store(path, AuditStore::Mode::kReadOnly);
  return verify_store(store);
}

}  // namespace zn::broker
