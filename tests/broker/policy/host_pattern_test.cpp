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

TEST(HostPattern, WildcardUnderARegularCcTldNameIsFine) {
  EXPECT_TRUE(parse_host_pattern("*.example.uk", nullptr));
  EXPECT_TRUE(parse_host_pattern("*.corp.co.uk", nullptr));
}

}  // namespace
}  // namespace zn::broker
