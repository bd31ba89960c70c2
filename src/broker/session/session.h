// A session: one microVM's TAP, addresses, policy and datapath state.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "broker/policy/compiled.h"
#include "broker/policy/datapath_plan.h"
#include "broker/session/session_state.h"
#include "vmm/host/guest_network.h"

namespace zn::broker {

// A guest port declared for ingress (znctl session expose): zerod's listener
// on the host admits clients to it; the datapath lets zerod's marked
// connection in to this port only.
struct ExposedPort {
  bool public_mode = false;  // false: a one-time ticket (or its binding) per client
  uint16_t listen_port = 0;  // zerod's listener (kept across restarts)
  unsigned family = 4;       // zerod connects to the guest's IPv4 or IPv6 address
  bool operator==(const ExposedPort&) const = default;
};

// What is persisted (the state file) to re-adopt a session after a restart.
struct SessionRecord {
  std::string id;
  uint32_t session_idx = 0;  // datapath index, 1..ZN_MAX_SESSIONS-1
  unsigned slot = 0;         // address slot (vmm::guest_network)
  std::string device;        // the TAP
  bool adopted = false;      // the device was there before the session (not ours to delete)
  std::string policy_json;   // as given (contains resources: state file is 0600)
  uint64_t policy_version = 1;
  int64_t created_unix = 0;
  // Resource name -> the random stand-in the guest holds for its credential
  // (session/placeholders.h). Not secret: worthless outside the proxy.
  std::map<std::string, std::string> placeholders;
  // Capability name -> its handle (session/cap_handles.h). Guest-visible.
  std::map<std::string, std::string> cap_handles;
  // Guest TCP port -> how it is exposed. Empty: nothing ever reaches in.
  std::map<uint16_t, ExposedPort> exposed;
};

struct Session {
  SessionRecord record;
  vmm::GuestNetwork net;
  int ifindex = 0;
  std::shared_ptr<const CompiledPolicy> policy;
  DatapathPlan plan;
  // The datapath admits zerod to the agent port (SessionRegistry::
  // set_agent_over_tcp); in memory only.
  bool agent_over_tcp = true;
  // What the session gathers while it lives: one object for every snapshot
  // of the session (an update's copy shares it), never null. Mutable
  // through a const snapshot by design: each part is thread-safe.
  std::shared_ptr<SessionState> state = std::make_shared<SessionState>();
};

// Session ids name audit events and files: [a-z0-9][a-z0-9_-]{0,63}.
bool valid_session_id(const std::string& id);

}  // namespace zn::broker
