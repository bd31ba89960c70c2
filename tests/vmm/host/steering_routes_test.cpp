#include <gtest/gtest.h>
#include <linux/rtnetlink.h>
#include <netlink/route/route.h>
#include <netlink/route/rule.h>

#include "common/netns.h"
#include "support/test_names.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/steering_routes.h"

namespace zn::vmm {
namespace {

using testing::TestNetns;

// Counted independently of the code under test, per family, so a rule or
// route missing for one family (or present twice) shows.
int count_rules(int family, std::uint32_t mark, std::uint32_t table) {
  RouteNetlink nl;
  nl_cache* raw = nullptr;
  check_nl(rtnl_rule_alloc_cache(nl.sock(), AF_UNSPEC, &raw), "dump rules");
  NlCache cache(raw);
  int n = 0;
  for (nl_object* o = nl_cache_get_first(raw); o; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_rule*>(o);
    n +=
        rtnl_rule_get_family(r) == family && rtnl_rule_get_mark(r) == mark && rtnl_rule_get_table(r) == table;
  }
  return n;
}

int count_local_routes(int family, std::uint32_t table) {
  RouteNetlink nl;
  nl_cache* raw = nullptr;
  check_nl(rtnl_route_alloc_cache(nl.sock(), AF_UNSPEC, 0, &raw), "dump routes");
  NlCache cache(raw);
  int n = 0;
  for (nl_object* o = nl_cache_get_first(raw); o; o = nl_cache_get_next(o)) {
    auto* r = reinterpret_cast<rtnl_route*>(o);
    n += rtnl_route_get_family(r) == family && rtnl_route_get_table(r) == table &&
         rtnl_route_get_type(r) == RTN_LOCAL;
  }
  return n;
}

void expect_counts(int n) {
  for (int family : {AF_INET, AF_INET6}) {
    SCOPED_TRACE(family == AF_INET ? "IPv4" : "IPv6");
    EXPECT_EQ(count_rules(family, 0x200, 100), n);
    EXPECT_EQ(count_local_routes(family, 100), n);
  }
}

void loopback_up() {
  RouteNetlink nl;
  nl.configure_link(nl.link_index("lo"), {});
}

TEST(SteeringRoutes, DefaultsMatchAbi) {
  auto d = SteeringRoutes::defaults();
  EXPECT_EQ(d.mark, 0x200u);
  EXPECT_EQ(d.mask, 0xf00u);
  EXPECT_EQ(d.table, 100u);
}

TEST(SteeringRoutes, InstallIsIdempotentAndRemoveCleans) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("steer");
  NetnsScope in_ns(ns.name());
  loopback_up();
  EXPECT_FALSE(steering_routes_installed());
  install_steering_routes();
  EXPECT_TRUE(steering_routes_installed());
  expect_counts(1);
  install_steering_routes();  // second time: no error, no duplicate
  EXPECT_TRUE(steering_routes_installed());
  expect_counts(1);
  remove_steering_routes();
  EXPECT_FALSE(steering_routes_installed());
  expect_counts(0);
  remove_steering_routes();  // nothing left to remove: no error
  // A duplicate would survive one removal; check nothing of it is left at all.
  install_steering_routes();
  remove_steering_routes();
  EXPECT_FALSE(steering_routes_installed());
}

TEST(SteeringRoutes, CustomMarkAndTable) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("steerc");
  NetnsScope in_ns(ns.name());
  loopback_up();
  const SteeringRoutes custom{0x300, 0xf00, 123};
  install_steering_routes(custom);
  EXPECT_TRUE(steering_routes_installed(custom));
  EXPECT_FALSE(steering_routes_installed());  // defaults are a different rule/table
  remove_steering_routes(custom);
  EXPECT_FALSE(steering_routes_installed(custom));
}

TEST(SteeringRoutes, NeedsLoopbackUp) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("steerd");
  NetnsScope in_ns(ns.name());
  EXPECT_THROW(install_steering_routes(), std::runtime_error);
}

}  // namespace
}  // namespace zn::vmm
