// The sessions of a zerod: create/update/delete/list, each change applied to
// the TAP, the BPF maps and the state file. Host-side changes happen in the
// calling thread's network namespace (zerod's). Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/session/directory.h"
#include "broker/session/session.h"
#include "userspace/datapath/maps.h"

namespace zn::broker {

// A request the registry refuses (unknown id, duplicate, no free slot...):
// the caller's mistake, reported as such; nothing was changed.
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SessionSpec {
  std::string id;
  std::string policy_json;
  std::optional<std::string> adopt_device;  // use this existing TAP instead of creating one
  std::optional<unsigned> slot;             // address slot; lowest free when unset
};

using AuditSink =
    std::function<void(const std::string& event, const std::string& sid, const nlohmann::json& detail)>;

class SessionRegistry : public SessionDirectory {
 public:
  struct Options {
    dp::DatapathMaps* maps = nullptr;
    int ingress_prog_fd = -1, egress_prog_fd = -1;
    vmm::AddressPlan addresses = vmm::AddressPlan::lab_default();
    NameResolver resolve;    // L4 rule names
    std::string state_path;  // "" = not persisted (tests)
    AuditSink audit;         // may be empty
    uint32_t event_rate = ZN_DEFAULT_EVENT_RATE, event_burst = ZN_DEFAULT_EVENT_BURST;
  };
  explicit SessionRegistry(Options options);

  // Throws PolicyError (bad policy), SessionError (bad request), or
  // std::runtime_error (host failure, after undoing what was done).
  Session create(const SessionSpec& spec);
  // New policy swapped in at once; the old one stays in force on any error.
  Session update(const std::string& id, const std::string& policy_json);
  void remove(const std::string& id);

  std::vector<Session> list() const;
  std::optional<Session> get(const std::string& id) const override;
  // The session a guest source address belongs to (DNS, proxy).
  std::optional<Session> find_by_guest_ip4(in_addr addr) const override;
  std::optional<Session> find_by_guest_ip6(const in6_addr& addr) const override;

  // Re-adopts the sessions of the state file after a restart: TAPs are kept
  // (or re-created if ours and gone), map entries rewritten, programs
  // re-attached in place. Returns the ids restored; failures are reported
  // through `failed` and leave that session out.
  std::vector<std::string> restore(std::vector<std::string>* failed = nullptr);

 private:
  void persist_locked() const;
  void install_locked(Session& s, bool created_device);
  uint32_t free_session_idx_locked() const;
  unsigned free_slot_locked(std::optional<unsigned> wanted) const;
  void emit(const std::string& event, const std::string& sid, const nlohmann::json& detail) const;

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
};

}  // namespace zn::broker
