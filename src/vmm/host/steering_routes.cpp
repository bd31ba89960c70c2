#include "vmm/host/steering_routes.h"

#include <linux/fib_rules.h>
#include <linux/rtnetlink.h>
#include <netlink/errno.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>

#include <string>

#include "vmm/host/route_netlink.h"
#include "zn_abi.h"

namespace zn::vmm {
namespace {

constexpr int kFamilies[] = {AF_INET, AF_INET6};
constexpr int kLoopbackIfindex = 1;  // lo is always ifindex 1 in every namespace

std::string family_name(int family) { return family == AF_INET ? "IPv4" : "IPv6"; }

NlObject<rtnl_rule> make_rule(int family, const SteeringRoutes& c) {
  NlObject<rtnl_rule> rule(rtnl_rule_alloc());
  rtnl_rule_set_family(rule.get(), family);
  rtnl_rule_set_mark(rule.get(), c.mark);
  rtnl_rule_set_mask(rule.get(), c.mask);
  rtnl_rule_set_table(rule.get(), c.table);
  rtnl_rule_set_action(rule.get(), FR_ACT_TO_TBL);
  return rule;
}

NlObject<rtnl_route> make_local_route(int family, const SteeringRoutes& c) {
  NlObject<rtnl_route> route(rtnl_route_alloc());
  NlAddr any = parse_nl_addr(family == AF_INET ? "0.0.0.0/0" : "::/0");
  rtnl_route_set_family(route.get(), family);
  rtnl_route_set_table(route.get(), c.table);
  rtnl_route_set_type(route.get(), RTN_LOCAL);
  rtnl_route_set_scope(route.get(), RT_SCOPE_HOST);
  rtnl_route_set_protocol(route.get(), RTPROT_STATIC);
  rtnl_route_set_dst(route.get(), any.get());
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  rtnl_route_nh_set_ifindex(nh, kLoopbackIfindex);
  rtnl_route_add_nexthop(route.get(), nh);
  return route;
}

// The kernel gives each rule added without a priority a fresh one, so
// NLM_F_EXCL cannot detect duplicates: look before adding.
bool rule_present(RouteNetlink& nl, int family, const SteeringRoutes& c) {
  nl_cache* raw = nullptr;
  check_nl(rtnl_rule_alloc_cache(nl.sock(), family, &raw), "dump " + family_name(family) + " rules");
  NlCache cache(raw);
  for (nl_object* obj = nl_cache_get_first(raw); obj; obj = nl_cache_get_next(obj)) {
    auto* r = reinterpret_cast<rtnl_rule*>(obj);
    // The dump may hold every family whatever was asked: filter here.
    if (rtnl_rule_get_family(r) == family && rtnl_rule_get_mark(r) == c.mark &&
        rtnl_rule_get_mask(r) == c.mask && rtnl_rule_get_table(r) == c.table &&
        rtnl_rule_get_action(r) == FR_ACT_TO_TBL)
      return true;
  }
  return false;
}

bool local_route_present(RouteNetlink& nl, int family, const SteeringRoutes& c) {
  nl_cache* raw = nullptr;
  check_nl(rtnl_route_alloc_cache(nl.sock(), family, 0, &raw), "dump " + family_name(family) + " routes");
  NlCache cache(raw);
  for (nl_object* obj = nl_cache_get_first(raw); obj; obj = nl_cache_get_next(obj)) {
    auto* r = reinterpret_cast<rtnl_route*>(obj);
    if (rtnl_route_get_family(r) == family && rtnl_route_get_table(r) == c.table &&
        rtnl_route_get_type(r) == RTN_LOCAL && nl_addr_get_prefixlen(rtnl_route_get_dst(r)) == 0)
      return true;
  }
  return false;
}

int tolerate(int rc, int harmless) { return rc == -harmless ? 0 : rc; }

}  // namespace

SteeringRoutes SteeringRoutes::defaults() { return {ZN_MARK_STEER, ZN_MARK_MASK, ZN_STEER_ROUTE_TABLE}; }

void install_steering_routes(const SteeringRoutes& c) {
  RouteNetlink nl;
  for (int family : kFamilies) {
    const std::string what = " (" + family_name(family) + ", table " + std::to_string(c.table) + ")";
    if (!local_route_present(nl, family, c))
      check_nl(tolerate(rtnl_route_add(nl.sock(), make_local_route(family, c).get(), NLM_F_EXCL), NLE_EXIST),
               "add local default route via lo" + what + "; is lo up?");
    if (!rule_present(nl, family, c))
      check_nl(tolerate(rtnl_rule_add(nl.sock(), make_rule(family, c).get(), NLM_F_EXCL), NLE_EXIST),
               "add fwmark rule" + what);
  }
}

void remove_steering_routes(const SteeringRoutes& c) {
  RouteNetlink nl;
  for (int family : kFamilies) {
    const std::string what = " (" + family_name(family) + ", table " + std::to_string(c.table) + ")";
    // Rules first, so no marked packet is routed to a table that is being emptied.
    // A rule may have been added more than once (e.g. by hand); bounded in
    // case the kernel keeps a rule our delete request does not match.
    for (int i = 0; i < 16 && rule_present(nl, family, c); ++i)
      check_nl(tolerate(rtnl_rule_delete(nl.sock(), make_rule(family, c).get(), 0), NLE_OBJ_NOTFOUND),
               "delete fwmark rule" + what);
    check_nl(tolerate(rtnl_route_delete(nl.sock(), make_local_route(family, c).get(), 0), NLE_OBJ_NOTFOUND),
             "delete local default route" + what);
  }
}

bool steering_routes_installed(const SteeringRoutes& c) {
  RouteNetlink nl;
  for (int family : kFamilies)
    if (!rule_present(nl, family, c) || !local_route_present(nl, family, c)) return false;
  return true;
}

}  // namespace zn::vmm
