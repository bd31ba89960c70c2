// The secrets the audit redacts, by session (issue 32): a session's records
// are redacted with its own resources' values (and the daemon-wide ones), so
// a record costs a scan of one session's secrets, not of every secret ever
// registered; a record of no session, or of a session not registered, with
// every value held. A deleted session's values are forgotten: zerod's memory
// holds no secret of a session that is gone (except in the snapshots of
// records still queued, which are redacted with what their session had when
// they were posted).
// Thread-safe; the redactors handed out are immutable snapshots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/audit/redact.h"

namespace zn::broker {

class AuditSecrets {
 public:
  AuditSecrets();

  // A daemon-wide secret, redacted from every record. False if not accepted
  // (shorter than 8 bytes, not valid UTF-8).
  bool add(std::string value);
  // Replaces the session's own values (a policy update retires the old
  // ones); how many were accepted (the others, too short or not text,
  // cannot be matched and are left out).
  size_t set_session(const std::string& sid, const std::vector<std::string>& values);
  void forget_session(const std::string& sid);

  // What a record of `sid` is redacted with.
  std::shared_ptr<const AuditRedactor> for_record(const std::string& sid) const;
  // Values held (daemon-wide and every session's, a value shared by two
  // sessions counted twice).
  size_t count() const;

 private:
  struct Session {
    std::shared_ptr<const AuditRedactor> redactor;  // the daemon-wide values and its own
    size_t own = 0;
  };

  void invalidate_all();  // under mu_: a value came or went

  mutable std::mutex mu_;
  AuditRedactor global_;
  std::unordered_map<std::string, Session> sessions_;
  size_t held_ = 0;
  // Every value, for records of no session; built when first asked for
  // after a change.
  mutable std::shared_ptr<const AuditRedactor> all_;
  uint64_t generation_ = 0;  // changes since start: a merge made meanwhile is stale
};

}  // namespace zn::broker
