#include "vmm/microvm/guest_config.h"

#include <stdexcept>

#include "vmm/microvm/newc_archive.h"

namespace zn::vmm {
namespace {

// Values go into a file /init sources: only characters no shell gives a
// meaning to.
void check_value(const std::string& v) {
  for (char c : v)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == ':' || c == '/' || c == '-' || c == '_'))
      throw std::invalid_argument("guest config value holds '" + std::string(1, c) + "'");
}

}  // namespace

std::string guest_conf(const GuestBoot& boot) {
  const GuestNetwork& n = boot.network;
  const bool virtio = !boot.agent_config.empty() && boot.agent_transport == AgentTransport::kVirtioSerial;
  const std::pair<const char*, std::string> lines[] = {
      {"ZN_HOSTNAME", boot.hostname},
      {"ZN_MAC", net::to_string(n.guest_mac)},
      {"ZN_IP4", net::to_string(n.guest_ip4) + "/" + std::to_string(n.prefix4)},
      {"ZN_GW4", net::to_string(n.gateway_ip4)},
      {"ZN_IP6", net::to_string(n.guest_ip6) + "/" + std::to_string(n.prefix6)},
      {"ZN_GW6", net::to_string(n.gateway_ip6)},
      // Any resolver reaches zerod (the datapath steers DNS): the gateway's.
      {"ZN_DNS", net::to_string(n.gateway_ip4)},
      {"ZN_MTU", std::to_string(GuestNetwork::kMtu)},
      {"ZN_POWEROFF", boot.poweroff_after ? "1" : "0"},
      {"ZN_AGENT_PORT", std::to_string(boot.agent_config.empty() || virtio ? 0 : boot.agent_port)},
      {"ZN_AGENT_VIRTIO", virtio ? kAgentPortPrefix : ""},
  };
  std::string out = "# zeroness guest configuration (public: no secret is ever here)\n";
  for (const auto& [key, value] : lines) {
    check_value(value);
    out.append(key).append("=").append(value).append("\n");
  }
  return out;
}

std::string guest_config_archive(const GuestBoot& boot) {
  std::vector<ArchiveEntry> entries = {
      {"zn", 0755, true, {}},
      {"zn/guest.conf", 0644, false, guest_conf(boot)},
      {"zn/ca.pem", 0644, false, boot.ca_pem},
  };
  if (!boot.user_data.empty()) entries.push_back({"zn/user-data", 0755, false, boot.user_data});
  if (!boot.agent_config.empty()) {
    if (boot.agent_binary.empty()) throw std::invalid_argument("an agent config without the agent binary");
    entries.push_back({"zn/zn-agent", 0755, false, boot.agent_binary});
    entries.push_back({"zn/agent.conf", 0600, false, boot.agent_config});
  }
  return newc_archive(entries);
}

}  // namespace zn::vmm
