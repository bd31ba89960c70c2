// A route-netlink (libnl) connection bound to the calling thread's network
// namespace, with the few link/address/route operations the host plumbing
// needs. The namespace is fixed when the object is constructed: build it
// inside a zn::NetnsScope to configure another namespace.
#pragma once

#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/object.h>
#include <netlink/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/net/address.h"

namespace zn::vmm {

// Throws std::runtime_error("<what>: <libnl message>") when rc < 0; returns rc.
int check_nl(int rc, const std::string& what);

struct NlObjectPut {
  void operator()(void* obj) const noexcept { nl_object_put(static_cast<nl_object*>(obj)); }
};
struct NlAddrPut {
  void operator()(nl_addr* addr) const noexcept { nl_addr_put(addr); }
};
struct NlCacheFree {
  void operator()(nl_cache* cache) const noexcept { nl_cache_free(cache); }
};
// For rtnl_link / rtnl_addr / rtnl_route / rtnl_rule, which are all nl_objects.
template <typename T>
using NlObject = std::unique_ptr<T, NlObjectPut>;
using NlAddr = std::unique_ptr<nl_addr, NlAddrPut>;
using NlCache = std::unique_ptr<nl_cache, NlCacheFree>;

// Parses "198.19.0.1/24", "2001:db8::1" (host prefix when no length given).
NlAddr parse_nl_addr(const std::string& text);

struct LinkSettings {
  std::optional<net::MacAddress> mac;
  std::optional<unsigned> mtu;
  bool up = true;
};

struct LinkState {
  int ifindex = 0;
  net::MacAddress mac{};
  unsigned mtu = 0;
  bool up = false;  // administratively (IFF_UP)
};

class RouteNetlink {
 public:
  RouteNetlink();  // connects in the calling thread's netns; throws
  RouteNetlink(const RouteNetlink&) = delete;
  RouteNetlink& operator=(const RouteNetlink&) = delete;
  ~RouteNetlink();

  nl_sock* sock() const noexcept { return sock_; }

  std::optional<LinkState> find_link(const std::string& name);
  int link_index(const std::string& name);  // throws if absent
  void configure_link(int ifindex, const LinkSettings& settings);
  // Returns false if no such link.
  bool delete_link(const std::string& name);
  // Moves a link into device group `group` (IFLA_GROUP); false if no such link.
  bool set_link_group(int ifindex, uint32_t group);
  // Deletes every link of `group` in one request. The kernel unregisters
  // them as one batch, so its per-unregister costs (an rcu_barrier, ~18 ms,
  // and a synchronize_net) are paid once for all of them, not per link.
  void delete_link_group(uint32_t group);
  // A veth pair whose peer is created directly in the namespace open as peer_netns_fd.
  void create_veth(const std::string& name, const std::string& peer_name, int peer_netns_fd);

  // Link-local address from the MAC (EUI-64), whatever the namespace's
  // default addr_gen_mode: the datapath knows a gateway's link-local in
  // advance this way. Takes effect when the link next comes up.
  void use_eui64_link_local(int ifindex);
  // cidr like "198.19.0.1/24". IPv6 addresses get IFA_F_NODAD: usable at once,
  // which a lab (and a TAP that must answer immediately) needs.
  void add_address(int ifindex, const std::string& cidr);
  std::vector<std::string> addresses(int ifindex);  // CIDR strings, both families
  // What still keeps the named links from passing traffic, empty when
  // nothing: a link that is missing, or up but not yet running (the kernel
  // activates its queue when it gets round to the carrier change,
  // asynchronously), and IPv6 addresses on them still tentative (not yet
  // local, their solicited-node group not yet joined).
  std::vector<std::string> unsettled(const std::vector<std::string>& link_names);

  // Main-table unicast route: dst_cidr (e.g. "0.0.0.0/0", "2001:db8:18::/48") via gateway.
  void add_route(const std::string& dst_cidr, const std::string& gateway);

 private:
  nl_sock* sock_ = nullptr;
};

}  // namespace zn::vmm
