#include "broker/audit_log.h"

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

AuditRecord AuditLog::append(AuditEvent ev) {
  validate_audit_event(ev);  // before taking the lock: throws, nothing written

  std::lock_guard lk(mu_);
  nlohmann::json detail = redactor_.redact(ev.detail);
  std::string sid = redactor_.redact(ev.sid);
  // "[redacted]" is longer than an 8-byte secret, so a near-limit sid can grow.
  if (sid.size() > kAuditMaxSidLen) sid = AuditRedactor::kMarker;

  AuditRecord rec = store_->append([&](uint64_t last_seq, const std::string& last_hash) {
    AuditRecord r;
    r.seq = last_seq + 1;
    r.ts = format_audit_ts(opts_.clock());
    r.event = std::move(ev.event);
    r.sid = std::move(sid);
    r.detail = std::move(detail);
    r.prev = last_hash;
    r.hash = audit_chain_hash(r.prev, r);
    return r;
  });

  try {
    opts_.sink(rec.json_line());
  } catch (...) {
    // The record is committed; reporting failure would invite a retry and a
    // duplicate record. The store remains the source of truth.
  }
  return rec;
}

std::vector<AuditRecord> AuditLog::query(const AuditQuery& q) {
  std::lock_guard lk(mu_);
  return store_->query(q);
}

AuditVerifyResult AuditLog::verify_store(AuditStore& store) {
  AuditChainVerifier v;
  store.for_each_raw([&](const AuditRawRow& row) { return v.feed(row); });
  return v.result();
}

AuditVerifyResult AuditLog::verify() {
  std::lock_guard lk(mu_);
  return verify_store(*store_);
}

AuditVerifyResult AuditLog::verify_file(const std::string& path) {
  AuditStore store(path, AuditStore::Mode::kReadOnly);
  return verify_store(store);
}

}  // namespace zn::broker
