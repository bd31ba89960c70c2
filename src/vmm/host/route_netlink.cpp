#include "vmm/host/route_netlink.h"

#include <linux/if_addr.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netlink/attr.h>
#include <netlink/errno.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet6.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace zn::vmm {

int check_nl(int rc, const std::string& what) {
  if (rc < 0) throw std::runtime_error(what + ": " + nl_geterror(rc));
  return rc;
}

NlAddr parse_nl_addr(const std::string& text) {
  nl_addr* addr = nullptr;
  check_nl(nl_addr_parse(text.c_str(), AF_UNSPEC, &addr), "parse address '" + text + "'");
  return NlAddr(addr);
}

RouteNetlink::RouteNetlink() : sock_(nl_socket_alloc()) {
  if (!sock_) throw std::runtime_error("nl_socket_alloc failed");
  int rc = nl_connect(sock_, NETLINK_ROUTE);
  if (rc < 0) {
    nl_socket_free(sock_);
    check_nl(rc, "connect rtnetlink");
  }
}

RouteNetlink::~RouteNetlink() { nl_socket_free(sock_); }

std::optional<LinkState> RouteNetlink::find_link(const std::string& name) {
  rtnl_link* raw = nullptr;
  int rc = rtnl_link_get_kernel(sock_, 0, name.c_str(), &raw);
  if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) return std::nullopt;
  check_nl(rc, "get link " + name);
  NlObject<rtnl_link> link(raw);
  LinkState state;
  state.ifindex = rtnl_link_get_ifindex(raw);
  state.mtu = rtnl_link_get_mtu(raw);
  state.up = (rtnl_link_get_flags(raw) & IFF_UP) != 0;
  if (nl_addr* mac = rtnl_link_get_addr(raw); mac && nl_addr_get_len(mac) == state.mac.size())
    std::memcpy(state.mac.data(), nl_addr_get_binary_addr(mac), state.mac.size());
  return state;
}

int RouteNetlink::link_index(const std::string& name) {
  auto link = find_link(name);
  if (!link) throw std::runtime_error("no network device named " + name);
  return link->ifindex;
}

void RouteNetlink::configure_link(int ifindex, const LinkSettings& settings) {
  rtnl_link* raw = nullptr;
  check_nl(rtnl_link_get_kernel(sock_, ifindex, nullptr, &raw), "get link #" + std::to_string(ifindex));
  NlObject<rtnl_link> current(raw);
  NlObject<rtnl_link> change(rtnl_link_alloc());
  if (settings.mac) {
    NlAddr mac(nl_addr_build(AF_LLC, settings.mac->data(), settings.mac->size()));
    rtnl_link_set_addr(change.get(), mac.get());
  }
  if (settings.mtu) rtnl_link_set_mtu(change.get(), *settings.mtu);
  // One RTM_NEWLINK: the kernel applies address and MTU before the flags.
  if (settings.up) rtnl_link_set_flags(change.get(), IFF_UP);
  check_nl(rtnl_link_change(sock_, current.get(), change.get(), 0),
           "configure link " + std::string(rtnl_link_get_name(current.get())));
}

bool RouteNetlink::delete_link(const std::string& name) {
  auto existing = find_link(name);
  if (!existing) return false;
  NlObject<rtnl_link> link(rtnl_link_alloc());
  rtnl_link_set_ifindex(link.get(), existing->ifindex);
  int rc = rtnl_link_delete(sock_, link.get());
  if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) return false;
  check_nl(rc, "delete link " + name);
  return true;
}

namespace {

// An RTM_*LINK request carrying only an ifinfomsg and IFLA_GROUP, sent and
// acknowledged (libnl builds neither a group change on its own nor a
// delete by group).
int link_group_request(nl_sock* sock, int type, int ifindex, uint32_t group) {
  nl_msg* msg = nlmsg_alloc_simple(type, 0);
  if (!msg) return -NLE_NOMEM;
  ifinfomsg ifi{};
  ifi.ifi_family = AF_UNSPEC;
  ifi.ifi_index = ifindex;
  if (nlmsg_append(msg, &ifi, sizeof(ifi), NLMSG_ALIGNTO) < 0 || nla_put_u32(msg, IFLA_GROUP, group) < 0) {
    nlmsg_free(msg);
    return -NLE_NOMEM;
  }
  return nl_send_sync(sock, msg);  // frees msg; waits for the ack
}

}  // namespace

bool RouteNetlink::set_link_group(int ifindex, uint32_t group) {
  int rc = link_group_request(sock_, RTM_SETLINK, ifindex, group);
  if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) return false;
  check_nl(rc, "set group of link #" + std::to_string(ifindex));
  return true;
}

void RouteNetlink::delete_link_group(uint32_t group) {
  const int rc = link_group_request(sock_, RTM_DELLINK, 0, group);
  if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) return;  // an empty group
  check_nl(rc, "delete link group " + std::to_string(group));
}

void RouteNetlink::create_veth(const std::string& name, const std::string& peer_name, int peer_netns_fd) {
  rtnl_link* link = rtnl_link_veth_alloc();
  if (!link) throw std::runtime_error("rtnl_link_veth_alloc failed");
  rtnl_link_set_name(link, name.c_str());
  rtnl_link* peer = rtnl_link_veth_get_peer(link);  // takes a reference
  rtnl_link_set_name(peer, peer_name.c_str());
  rtnl_link_set_ns_fd(peer, peer_netns_fd);
  rtnl_link_put(peer);
  int rc = rtnl_link_add(sock_, link, NLM_F_CREATE | NLM_F_EXCL);
  rtnl_link_veth_release(link);
  check_nl(rc, "create veth " + name + " <-> " + peer_name);
}

void RouteNetlink::use_eui64_link_local(int ifindex) {
  rtnl_link* raw = nullptr;
  check_nl(rtnl_link_get_kernel(sock_, ifindex, nullptr, &raw), "get link #" + std::to_string(ifindex));
  NlObject<rtnl_link> current(raw);
  NlObject<rtnl_link> change(rtnl_link_alloc());
  check_nl(rtnl_link_inet6_set_addr_gen_mode(change.get(), IN6_ADDR_GEN_MODE_EUI64), "addr_gen_mode");
  check_nl(rtnl_link_change(sock_, current.get(), change.get(), 0),
           "set addr_gen_mode of " + std::string(rtnl_link_get_name(current.get())));
}

void RouteNetlink::add_address(int ifindex, const std::string& cidr) {
  NlAddr local = parse_nl_addr(cidr);
  NlObject<rtnl_addr> addr(rtnl_addr_alloc());
  rtnl_addr_set_ifindex(addr.get(), ifindex);
  check_nl(rtnl_addr_set_local(addr.get(), local.get()), "set address " + cidr);
  if (nl_addr_get_family(local.get()) == AF_INET6) rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
  check_nl(rtnl_addr_add(sock_, addr.get(), NLM_F_EXCL),
           "add address " + cidr + " to link #" + std::to_string(ifindex));
}

std::vector<std::string> RouteNetlink::addresses(int ifindex) {
  nl_cache* raw = nullptr;
  check_nl(rtnl_addr_alloc_cache(sock_, &raw), "dump addresses");
  NlCache cache(raw);
  std::vector<std::string> out;
  for (nl_object* obj = nl_cache_get_first(raw); obj; obj = nl_cache_get_next(obj)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_ifindex(addr) != ifindex) continue;
    char buf[128];
    out.emplace_back(nl_addr2str(rtnl_addr_get_local(addr), buf, sizeof buf));
  }
  return out;
}

std::vector<std::string> RouteNetlink::unsettled(const std::vector<std::string>& link_names) {
  std::vector<std::string> out;
  std::vector<int> ifindexes;
  for (const auto& name : link_names) {
    rtnl_link* raw = nullptr;
    int rc = rtnl_link_get_kernel(sock_, 0, name.c_str(), &raw);
    if (rc == -NLE_OBJ_NOTFOUND || rc == -NLE_NODEV) {
      out.push_back("link " + name + " missing");
      continue;
    }
    check_nl(rc, "get link " + name);
    NlObject<rtnl_link> link(raw);
    ifindexes.push_back(rtnl_link_get_ifindex(raw));
    const unsigned flags = rtnl_link_get_flags(raw);
    if ((flags & IFF_UP) && !(flags & IFF_RUNNING)) out.push_back("link " + name + " not running");
  }
  nl_cache* raw_addrs = nullptr;
  check_nl(rtnl_addr_alloc_cache(sock_, &raw_addrs), "dump addresses");
  NlCache addrs(raw_addrs);
  for (nl_object* obj = nl_cache_get_first(raw_addrs); obj; obj = nl_cache_get_next(obj)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_family(addr) != AF_INET6 || !(rtnl_addr_get_flags(addr) & IFA_F_TENTATIVE)) continue;
    if (std::find(ifindexes.begin(), ifindexes.end(), rtnl_addr_get_ifindex(addr)) == ifindexes.end())
      continue;
    char buf[128];
    out.push_back(std::string("address ") + nl_addr2str(rtnl_addr_get_local(addr), buf, sizeof buf) +
                  " tentative");
  }
  return out;
}

void RouteNetlink::add_route(const std::string& dst_cidr, const std::string& gateway) {
  NlAddr dst = parse_nl_addr(dst_cidr);
  NlAddr gw = parse_nl_addr(gateway);
  NlObject<rtnl_route> route(rtnl_route_alloc());
  rtnl_route_set_family(route.get(), nl_addr_get_family(dst.get()));
  rtnl_route_set_table(route.get(), RT_TABLE_MAIN);
  rtnl_route_set_type(route.get(), RTN_UNICAST);
  rtnl_route_set_scope(route.get(), RT_SCOPE_UNIVERSE);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  check_nl(rtnl_route_set_dst(route.get(), dst.get()), "set route destination " + dst_cidr);
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  rtnl_route_nh_set_gateway(nh, gw.get());
  rtnl_route_add_nexthop(route.get(), nh);  // the route owns nh now
  check_nl(rtnl_route_add(sock_, route.get(), NLM_F_EXCL), "add route " + dst_cidr + " via " + gateway);
}

}  // namespace zn::vmm
