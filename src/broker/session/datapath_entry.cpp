#include "broker/session/datapath_entry.h"

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

}  // namespace zn::broker
