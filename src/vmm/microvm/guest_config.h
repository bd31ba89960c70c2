// What a microVM is told at boot (issue 14): its network from the session
// (addresses, gateways, resolver, MTU, MAC), the deployment CA to trust, and
// the operator's optional user-data script — as a small cpio archive the host
// appends to the shared initramfs (newc_archive.h). The guest image's /init
// (scripts/guest/init) reads /zn/guest.conf. Nothing secret is in
// guest.conf: the CA is the public certificate, and user-data is the
// operator's script, shown in `vm console` like the rest of the boot. The
// one secret is the command agent's config (zn/agent.conf, 0600: its result
// key, issue 15), which /init moves where only root reads it before anything
// of the workload runs; the archive itself is the VM uid's alone on the host.
#pragma once

#include <string>

#include "vmm/host/guest_network.h"

namespace zn::vmm {

// How zerod reaches the VM's command agent (issue 15): virtio-serial ports
// where the VMM has them (QEMU: no network involved, nothing for the
// datapath to admit), else the agent port over the session's network.
enum class AgentTransport { kTcp, kVirtioSerial };

// The virtio-serial ports an agent serves are named kAgentPortPrefix.N,
// N < kAgentChannels: that many commands can run in a VM at once.
inline constexpr const char* kAgentPortPrefix = "org.zeroness.agent";
inline constexpr int kAgentChannels = 4;

struct GuestBoot {
  GuestNetwork network;
  std::string hostname;         // the session id
  std::string ca_pem;           // the deployment CA certificate (public)
  std::string user_data;        // a sh script run once at boot; "" none
  bool poweroff_after = false;  // power off once user-data has run
  // The command agent (issue 15): its static binary and its config (secret);
  // both empty: the VM has no agent.
  std::string agent_binary;
  std::string agent_config;
  uint16_t agent_port = 0;  // with kTcp
  AgentTransport agent_transport = AgentTransport::kTcp;
};

// /zn/guest.conf: KEY=value lines (ZN_IP4, ZN_GW4, ZN_IP6, ZN_GW6, ZN_DNS,
// ZN_MTU, ZN_MAC, ZN_HOSTNAME, ZN_POWEROFF, ZN_AGENT_PORT, ZN_AGENT_VIRTIO:
// the port prefix the agent serves, or "" when it listens on ZN_AGENT_PORT).
std::string guest_conf(const GuestBoot& boot);

// The archive: zn/, zn/guest.conf, zn/ca.pem, zn/user-data when given, and
// zn/zn-agent with zn/agent.conf when the VM has an agent.
std::string guest_config_archive(const GuestBoot& boot);

}  // namespace zn::vmm
