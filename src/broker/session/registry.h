// The sessions of a zerod: create/update/delete/list, each change applied to
// the TAP, the BPF maps and the state file. Host-side changes happen in the
// calling thread's network namespace (zerod's). Thread-safe.
//
// Two locks, so the data path never waits for the control plane's I/O:
// changes are serialised by a control lock held across name resolution,
// device changes and the state file; lookups (DNS, proxy, drop events) only
// touch the SessionIndex, whose lock is held to find or swap a pointer.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/session/directory.h"
#include "broker/session/index.h"
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
  SessionPtr create(const SessionSpec& spec);
  // New policy swapped in at once; the old one stays in force on any error.
  SessionPtr update(const std::string& id, const std::string& policy_json);
  void remove(const std::string& id);

  // Id order. Never waits for a change in progress.
  std::vector<SessionPtr> list() const { return index_.all(); }
  size_t size() const { return index_.size(); }
  SessionPtr get(const std::string& id) const override { return index_.by_id(id); }
  // The session a guest source address belongs to (DNS, proxy).
  SessionPtr find_by_guest_ip4(in_addr addr) const override { return index_.by_guest_ip4(addr); }
  SessionPtr find_by_guest_ip6(const in6_addr& addr) const override { return index_.by_guest_ip6(addr); }
  // The session of a datapath index (drop events).
  SessionPtr find_by_session_idx(uint32_t idx) const { return index_.by_session_idx(idx); }

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
  // Publishes (or withdraws) a session and the index and slot it holds.
  void publish_locked(SessionPtr s);
  SessionPtr withdraw_locked(const std::string& id);
  void emit(const std::string& event, const std::string& sid, const nlohmann::json& detail) const;

  Options options_;
  std::mutex control_mu_;  // serialises changes; the data path never takes it
  SessionIndex index_;
  std::set<uint32_t> used_idx_;  // under control_mu_
  std::set<unsigned> used_slots_;
};

}  // namespace zn::broker
