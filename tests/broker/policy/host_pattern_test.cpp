#include "broker/policy/host_pattern.h"

#include <gtest/gtest.h>

namespace zn::broker {
namespace {

TEST(HostPattern, ExactNamesAreNormalised) {
  auto h = parse_host_pattern("API.GitHub.com.", nullptr);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->kind, HostPattern::Kind::kExact);
  EXPECT_EQ(h->name, "api.github.com");
}

TEST(HostPattern, WildcardKeepsTheSuffix) {
  auto h = parse_host_pattern("*.npmjs.org", nullptr);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->kind, HostPattern::Kind::kWildcard);
  EXPECT_EQ(h->name, "npmjs.org");
}

TEST(HostPattern, AddressesAndCidrs) {
  for (const char* text : {"198.18.0.20", "198.18.0.0/24", "2001:db8::1", "2001:db8::/32"}) {
    auto h = parse_host_pattern(text, nullptr);
    ASSERT_TRUE(h) << text;
    EXPECT_EQ(h->kind, HostPattern::Kind::kAddress) << text;
  }
}

struct Rejected {
  const char* text;
  const char* why_contains;
};

class HostPatternRejects : public ::testing::TestWithParam<Rejected> {};

TEST_P(HostPatternRejects, WithAReason) {
  std::string why;
  EXPECT_FALSE(parse_host_pattern(GetParam().text, &why)) << GetParam().text;
  EXPECT_NE(why.find(GetParam().why_contains), std::string::npos) << GetParam().text << ": " << why;
}

INSTANTIATE_TEST_SUITE_P(
    All, HostPatternRejects,
    ::testing::Values(Rejected{"", "empty"}, Rejected{"*", "'*'"}, Rejected{"*.com", "too broad"},
                      Rejected{"*.co.uk", "public suffix"}, Rejected{"*.com.au", "public suffix"},
                      Rejected{"api.*.com", "whole leading label"}, Rejected{"*.*.example.com", "character"},
                      Rejected{"foo*.example.com", "whole leading label"}, Rejected{"a..b", "empty label"},
                      Rejected{"-a.example", "'-'"}, Rejected{"exa mple.com", "character"},
                      Rejected{"ex/ample.com", "character"}, Rejected{"198.18.0.0/33", "prefix"},
                      Rejected{"2001:db8::/129", "prefix"}, Rejected{"198.18.0.0/", "prefix"},
                      Rejected{"198.18.0.0/x", "prefix"},
                      Rejected{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
                               "63"}));

TEST(HostPattern, NamesLongerThan253AreRefused) {
  std::string name;
  while (name.size() < 260) name += "abcdefgh.";
  name += "com";
  std::string why;
  EXPECT_FALSE(parse_host_pattern(name, &why));
  EXPECT_NE(why.find("253"), std::string::npos);
}

TEST(HostPattern, IpLiterals) {
  for (const char* text : {"198.18.0.20", "::1", "FE80::1", "2001:DB8::a", "::ffff:198.18.0.1",
                           // the longest text form of an address: 45 characters
                           "0000:0000:0000:0000:0000:ffff:255.255.255.255"})
    EXPECT_TRUE(is_ip_literal(text)) << text;
  for (const char* text : {"", "api.example.com", "cafe", "1.2.3", "1.2.3.4.5", "::g", "198.18.0.0/24",
                           "0000:0000:0000:0000:0000:ffff:255.255.255.255:"})
    EXPECT_FALSE(is_ip_literal(text)) << text;
}

// The text after a NUL is not ignored: "1.2.3.4\0x" is no address, and as a
// name it has a character outside [a-z0-9-_].
TEST(HostPattern, ANulIsNeverCutOff) {
  const std::string_view text("1.2.3.4\0x", 9);
  EXPECT_FALSE(is_ip_literal(text));
  EXPECT_FALSE(is_ip_literal(std::string_view("1.2.3.4\0", 8)));
  std::string why;
  EXPECT_FALSE(parse_host_pattern(text, &why));
  EXPECT_NE(why.find("character"), std::string::npos) << why;
}

TEST(HostPattern, WildcardUnderARegularCcTldNameIsFine) {
  EXPECT_TRUE(parse_host_pattern("*.example.uk", nullptr));
  EXPECT_TRUE(parse_host_pattern("*.corp.co.uk", nullptr));
}

}  // namespace
}  // namespace zn::broker
