// Retention for the local audit store (issue 16): records older than
// max_age or beyond the newest max_records are deleted, oldest first, in
// chunks (one transaction each, so the audit's writer waits at most one),
// and the store keeps a checkpoint where it was cut: the last deleted
// record's seq and hash, signed by the audit key. The chain that remains
// verifies from it, and a cut nobody signed shows. Each pass that cuts is
// audited (audit:pruned). Runs on its own thread, never the data path's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/identity/signing_key.h"

namespace zn::broker {

struct AuditRetentionOptions {
  std::chrono::seconds max_age{0};  // 0 = no age limit
  uint64_t max_records = 0;         // 0 = no count limit
  std::chrono::seconds interval{3600};
  uint64_t chunk = 10000;  // records per transaction
  bool background = true;  // false: no thread, only run_once() (tests)
};

// "audit_retention": {"max_age_days": N, "max_records": N, "interval_s": N}.
// Throws PolicyError with the field's path.
AuditRetentionOptions parse_audit_retention(const nlohmann::json& j);

class AuditRetention {
 public:
  // Starts the thread (its first pass right away) when a limit is set.
  AuditRetention(AuditRetentionOptions options, AuditLog& audit, std::shared_ptr<const SigningKey> key);
  ~AuditRetention();
  AuditRetention(const AuditRetention&) = delete;
  AuditRetention& operator=(const AuditRetention&) = delete;

  // One pass now, on the caller's thread (tests, `znctl audit prune`): the records deleted.
  uint64_t run_once();

 private:
  AuditRetentionOptions options_;
  AuditLog& audit_;
  std::shared_ptr<const SigningKey> key_;
  std::mutex pass_mu_;  // one pass at a time
  std::mutex mu_;       // stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zn::broker
