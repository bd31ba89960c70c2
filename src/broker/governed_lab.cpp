#include "broker/governed_lab.h"

#include "common/netns.h"
#include "userspace/datapath/bpffs.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"

namespace zn::broker {

dp::SessionEntry session_entry_for(const vmm::GuestNetwork& net, uint32_t session_idx) {
  dp::SessionEntry s;
  s.session_idx = session_idx;
  s.guest_mac = net.guest_mac;
  s.guest_ip4 = net.guest_ip4;
  s.gateway_ip4 = net.gateway_ip4;
  s.guest_ip6 = net.guest_ip6;
  s.guest_ip6_ll = net.guest_ip6_ll;
  s.gateway_ip6 = net.gateway_ip6;
  s.gateway_ip6_ll = net.gateway_ip6_ll;
  return s;
}

std::string lab_pin_root(const std::string& lab_prefix) {
  return std::string(dp::kDefaultPinRoot) + "-" + lab_prefix;
}

void govern_lab(const vmm::Lab& lab) {
  NetnsScope in_host(lab.host_netns());
  auto datapath = dp::Datapath::load({lab_pin_root(lab.prefix())});
  dp::DatapathMaps maps(datapath->map_fds());
  maps.set_listeners({});
  for (const auto& g : lab.guests()) {
    maps.put_session(g.tap_ifindex, session_entry_for(g, g.slot + 1));
    dp::TcAttachment::attach(g.tap_ifindex, datapath->ingress_prog_fd(), datapath->egress_prog_fd())
        .release();
  }
}

void ungovern_lab(const std::string& lab_prefix) { dp::remove_pin_root(lab_pin_root(lab_prefix)); }

}  // namespace zn::broker
