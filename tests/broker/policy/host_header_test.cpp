#include "broker/policy/host_header.h"

#include <gtest/gtest.h>

namespace zn::broker {
namespace {

TEST(HostHeader, NameIsLoweredAndLosesItsTrailingDot) {
  auto h = parse_host_header("Api.GitHub.com.");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->name, "api.github.com");
  EXPECT_FALSE(h->port);
}

TEST(HostHeader, PortIsSeparated) {
  auto h = parse_host_header("api.github.com:443");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->name, "api.github.com");
  EXPECT_EQ(h->port, 443);
}

TEST(HostHeader, BracketedIpv6) {
  auto h = parse_host_header("[2001:DB8::1]:8443");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->name, "2001:db8::1");
  EXPECT_EQ(h->port, 8443);
  h = parse_host_header("[2001:db8::1]");
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->port);
}

TEST(HostHeader, RejectsWhatIsNotHostAndPort) {
  for (const char* bad : {"", ":443", "a.example:", "a.example:0", "a.example:65536", "a.example:44x",
                          "a.example:123456", "[2001:db8::1", "[2001:db8::1]x", "[2001:db8::1]:"})
    EXPECT_FALSE(parse_host_header(bad)) << bad;
}

}  // namespace
}  // namespace zn::broker
