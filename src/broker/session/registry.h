// The sessions of a zerod: create/update/delete/list, each change applied to
// the TAP, the BPF maps and the state file. Host-side changes happen in the
// calling thread's network namespace (zerod's). Thread-safe.
//
// Two locks, so the data path never waits for the control plane's I/O:
// changes are serialised by a control lock held across name resolution,
// device changes and the state file; lookups (DNS, proxy, drop events) only
// touch the SessionIndex, whose lock is held to find or swap a pointer.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/secrets/host_key.h"
#include "broker/session/directory.h"
#include "broker/session/index.h"
#include "broker/session/participant.h"
#include "broker/session/session.h"
#include "userspace/datapath/maps.h"
#include "vmm/host/tap_reaper.h"

namespace zn::broker {

class StateFile;

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

// Numbers in use (datapath indices, address slots) and the lowest free one,
// found from a low-water mark rather than by walking every number in use: a
// create at 10k sessions must not cost 10k steps.
class NumberPool {
 public:
  bool taken(unsigned n) const { return n < bits_.size() && bits_[n]; }
  void take(unsigned n) {
    if (n >= bits_.size()) bits_.resize(n + 1);
    bits_[n] = true;
  }
  void release(unsigned n) {
    if (n < bits_.size()) bits_[n] = false;
    low_ = std::min(low_, n);
  }
  unsigned lowest_free() {
    while (taken(low_)) ++low_;  // everything below low_ is taken
    return low_;
  }

 private:
  std::vector<bool> bits_;
  unsigned low_ = 0;
};

class SessionRegistry : public SessionDirectory {
 public:
  struct Options {
    dp::DatapathMaps* maps = nullptr;
    int ingress_prog_fd = -1, egress_prog_fd = -1;
    vmm::AddressPlan addresses = vmm::AddressPlan::lab_default();
    NameResolver resolve;    // L4 rule names
    std::string state_path;  // "" = not persisted (tests)
    // Resource values are sealed under it in each record (sealed_policy.h):
    // required with a state file; null keeps them as given (tests).
    std::shared_ptr<const HostKey> host_key;
    AuditSink audit;  // may be empty
    uint32_t event_rate = ZN_DEFAULT_EVENT_RATE, event_burst = ZN_DEFAULT_EVENT_BURST;
    // The bounds of each session's own state (session_state.h).
    SessionLimits limits;
    // The guest's DNS datagrams per second, dropped in the datapath past it.
    uint32_t dns_rate = ZN_DEFAULT_DNS_RATE, dns_burst = ZN_DEFAULT_DNS_BURST;
    vmm::TapReaper::BeforeBatch before_reap;  // tests: holds the TAP reaper
    // What only zerod's config can judge of a new policy (the stores its
    // capabilities name): throws PolicyError to refuse it. Not on restore.
    std::function<void(const Policy&)> check_policy;
    // The in-sandbox agent's port (issue 15), declared in every session's
    // datapath entry for zerod's marked connection alone (no listener, no
    // ticket); 0: none.
    uint16_t agent_port = 0;
  };
  explicit SessionRegistry(Options options);
  ~SessionRegistry() override;

  // A part told of every session's changes from now on (participant.h), in
  // the order joined. Before restore() and before any other thread uses the
  // registry; the participant outlives it or leaves by its destruction.
  void add_participant(SessionParticipant& participant) { participants_.push_back(&participant); }

  // Each change below is the one call for it: the participants are told.
  // Throws PolicyError (bad policy), SessionError (bad request), or
  // std::runtime_error (host failure, after undoing what was done).
  SessionPtr create(const SessionSpec& spec);
  // New policy swapped in at once; the old one stays in force on any error.
  SessionPtr update(const std::string& id, const std::string& policy_json);
  // The session's datapath entry goes first, so from that moment the
  // attached programs find no session for the device and drop all it
  // carries. A TAP zerod made is then reaped. An adopted device is not ours
  // to delete: it stays "parked" (the programs attached, no entry: deny
  // all) until it disappears or a new session adopts it, so deleting a
  // session never leaves a device open. `detach` is the operator's explicit
  // choice to hand an adopted device back ungoverned (programs removed).
  void remove(const std::string& id, bool detach = false);
  // Declares a guest port (or changes how it is exposed), or with nullopt
  // withdraws it: the session's datapath entry lists exactly the declared
  // ports from then on. Throws SessionError (no session, port 0, more than
  // ZN_MAX_EXPOSED_PORTS, not declared), std::runtime_error (host failure,
  // nothing changed).
  SessionPtr set_exposed(const std::string& id, uint16_t port, std::optional<ExposedPort> exposure);
  // Whether the datapath admits zerod's connection to the agent port
  // (options.agent_port): not while the session's VM reaches its agent
  // over virtio-serial. Not persisted (a VM never outlives zerod). A
  // session that is gone is ignored.
  void set_agent_over_tcp(const std::string& id, bool over_tcp);

  // Id order. Never waits for a change in progress.
  std::vector<SessionPtr> list() const { return index_.all(); }
  // The parked devices: those of zerod's network namespace that carry the
  // datapath's filters but belong to no session (an adopted device whose
  // session was deleted, kept denying; remove()). Read from the kernel, so
  // a restart of zerod forgets none. Name order.
  struct ParkedDevice {
    std::string name;
    int ifindex = 0;
  };
  std::vector<ParkedDevice> parked() const;
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
  // through `failed` and leave that session out. Every sealed value is
  // opened first, under the host key or `rotating_to` (a rotation a crash
  // interrupted): one that opens under neither throws SealedStateError with
  // nothing installed or rewritten (a missing or wrong key is a refusal to
  // start, never an empty store). Records from before sealing are sealed.
  std::vector<std::string> restore(std::vector<std::string>* failed = nullptr,
                                   const HostKey* rotating_to = nullptr);

  // Key rotation: every record resealed under `next` and written as a new
  // state snapshot; then `next` is the key new records are sealed under.
  // On any error nothing changed (the old key still opens the file).
  void reseal_all(std::shared_ptr<const HostKey> next);
  // The id of the key records are sealed under; "" without one.
  std::string host_key_id() const;

  // Waits until the TAPs of removed sessions are gone (tests, benchmarks).
  void wait_devices_reaped() { reaper_.drain(); }

 private:
  // One journal record per change; compacts when the journal is long.
  void persist_put_locked(const SessionRecord& record);
  void persist_erase_locked(const std::string& id);
  void compact_if_due_locked();
  // Frees the slots of TAPs the reaper has deleted since the last call.
  void collect_reaped_locked();
  void install_locked(Session& s, bool created_device);
  dp::SessionEntry entry_locked(const Session& s) const;
  uint32_t free_session_idx_locked();
  unsigned free_slot_locked(std::optional<unsigned> wanted);
  // Publishes (or withdraws) a session and the index and slot it holds.
  void publish_locked(SessionPtr s);
  // keep_slot: the slot stays taken until its TAP is reaped (the name and
  // addresses are the slot's).
  SessionPtr withdraw_locked(const std::string& id, bool keep_slot = false);
  void emit(const std::string& event, const std::string& sid, const nlohmann::json& detail) const;
  // The policy JSON a record keeps: its resource values sealed.
  std::string sealed_locked(const std::string& id, const std::string& policy_json,
                            const Policy& parsed) const;
  std::vector<SessionRecord> live_records_locked() const;

  // Told of each change, in order (participant.h).
  void tell_publishing_locked(const Session* before, const Session& next);
  void tell_published_locked(const Session* before, const Session& now);
  void tell_removed_locked(const Session& s);

  Options options_;
  std::vector<SessionParticipant*> participants_;  // set before any change
  mutable std::mutex control_mu_;                  // serialises changes; the data path never takes it
  SessionIndex index_;
  NumberPool used_idx_;  // under control_mu_; 0 is never a session's
  NumberPool used_slots_;
  std::unique_ptr<StateFile> state_;                   // under control_mu_; null if not persisted
  std::unordered_map<std::string, unsigned> reaping_;  // TAP -> slot, under control_mu_
  std::mutex reaped_mu_;                               // the reaper's hand-over
  std::vector<std::string> reaped_;                    // gone, slot not yet freed
  size_t reaped_since_trim_ = 0;                       // the reaper's thread only
  static constexpr size_t kTrimAfterDeletes = 256;
  // Last: stopped (and its queue reaped) before the members it calls back into.
  vmm::TapReaper reaper_;
};

}  // namespace zn::broker
