// The classifier against IANA's IPv4 and IPv6 special-purpose registries:
// every entry, addresses just inside and just outside its boundaries, the
// globally reachable exceptions inside refused entries, and every IPv6 form
// that carries an IPv4 address.
#include "userspace/proxy/destination_class.h"

#include <gtest/gtest.h>

namespace zn::proxy {
namespace {

using C = DestinationClass;

struct Case {
  const char* address;
  C cls;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.address; }

class DestinationClassTest : public ::testing::TestWithParam<Case> {};

TEST_P(DestinationClassTest, Classifies) {
  auto a = zn::net::IpAddress::parse(GetParam().address);
  ASSERT_TRUE(a) << GetParam().address;
  DestinationVerdict v = classify_destination(*a);
  EXPECT_EQ(destination_class_name(v.cls), destination_class_name(GetParam().cls)) << GetParam().address;
  EXPECT_EQ(v.internal(), GetParam().cls != C::kPublic) << GetParam().address;
}

// Hostile first: every refused entry, at both ends and just outside.
INSTANTIATE_TEST_SUITE_P(
    Ipv4Registry, DestinationClassTest,
    ::testing::Values(
        Case{"0.0.0.0", C::kUnspecified}, Case{"0.255.255.255", C::kUnspecified}, Case{"1.0.0.0", C::kPublic},
        Case{"9.255.255.255", C::kPublic}, Case{"10.0.0.0", C::kPrivate}, Case{"10.255.255.255", C::kPrivate},
        Case{"11.0.0.0", C::kPublic}, Case{"100.63.255.255", C::kPublic}, Case{"100.64.0.0", C::kCgnat},
        Case{"100.127.255.255", C::kCgnat}, Case{"100.128.0.0", C::kPublic},
        Case{"126.255.255.255", C::kPublic}, Case{"127.0.0.0", C::kLoopback}, Case{"127.0.0.1", C::kLoopback},
        Case{"127.255.255.255", C::kLoopback}, Case{"128.0.0.0", C::kPublic},
        Case{"169.253.255.255", C::kPublic}, Case{"169.254.0.0", C::kLinkLocal},
        Case{"169.254.169.253", C::kLinkLocal}, Case{"169.254.169.254", C::kMetadata},
        Case{"169.254.255.255", C::kLinkLocal}, Case{"169.255.0.0", C::kPublic},
        Case{"172.15.255.255", C::kPublic}, Case{"172.16.0.0", C::kPrivate},
        Case{"172.31.255.255", C::kPrivate}, Case{"172.32.0.0", C::kPublic},
        Case{"191.255.255.255", C::kPublic}, Case{"192.0.0.0", C::kProtocolAssignments},
        Case{"192.0.0.8", C::kProtocolAssignments}, Case{"192.0.0.170", C::kProtocolAssignments},
        Case{"192.0.0.171", C::kProtocolAssignments}, Case{"192.0.0.255", C::kProtocolAssignments},
        Case{"192.0.1.0", C::kPublic}, Case{"192.0.2.0", C::kDocumentation},
        Case{"192.0.2.255", C::kDocumentation}, Case{"192.0.3.0", C::kPublic},
        Case{"192.88.98.255", C::kPublic}, Case{"192.88.99.0", C::kSixToFour},
        Case{"192.88.99.2", C::kSixToFour}, Case{"192.88.99.255", C::kSixToFour},
        Case{"192.88.100.0", C::kPublic}, Case{"192.167.255.255", C::kPublic},
        Case{"192.168.0.0", C::kPrivate}, Case{"192.168.255.255", C::kPrivate},
        Case{"192.169.0.0", C::kPublic}, Case{"198.17.255.255", C::kPublic},
        Case{"198.18.0.0", C::kBenchmarking}, Case{"198.18.0.10", C::kBenchmarking},
        Case{"198.19.0.1", C::kBenchmarking}, Case{"198.19.255.255", C::kBenchmarking},
        Case{"198.20.0.0", C::kPublic}, Case{"198.51.99.255", C::kPublic},
        Case{"198.51.100.0", C::kDocumentation}, Case{"198.51.100.255", C::kDocumentation},
        Case{"198.51.101.0", C::kPublic}, Case{"203.0.112.255", C::kPublic},
        Case{"203.0.113.0", C::kDocumentation}, Case{"203.0.113.255", C::kDocumentation},
        Case{"203.0.114.0", C::kPublic}, Case{"223.255.255.255", C::kPublic},
        Case{"224.0.0.0", C::kMulticast}, Case{"239.255.255.255", C::kMulticast},
        Case{"240.0.0.0", C::kReserved}, Case{"255.255.255.254", C::kReserved},
        Case{"255.255.255.255", C::kReserved}));

// The registry's globally reachable entries inside refused ones, and
// ordinary public addresses: the positive controls.
INSTANTIATE_TEST_SUITE_P(GloballyReachable, DestinationClassTest,
                         ::testing::Values(Case{"192.0.0.9", C::kPublic}, Case{"192.0.0.10", C::kPublic},
                                           Case{"192.31.196.1", C::kPublic}, Case{"192.52.193.1", C::kPublic},
                                           Case{"192.175.48.1", C::kPublic}, Case{"8.8.8.8", C::kPublic},
                                           Case{"2001:1::1", C::kPublic}, Case{"2001:1::2", C::kPublic},
                                           Case{"2001:1::3", C::kPublic}, Case{"2001:3::1", C::kPublic},
                                           Case{"2001:4:112::1", C::kPublic}, Case{"2001:20::1", C::kPublic},
                                           Case{"2001:2f:ffff::1", C::kPublic},
                                           Case{"2001:30::1", C::kPublic},
                                           Case{"2620:4f:8000::1", C::kPublic},
                                           Case{"2606:4700::1111", C::kPublic},
                                           Case{"2a00:1450::1", C::kPublic}, Case{"3ffe:ffff::1", C::kPublic},
                                           Case{"2001:200::1", C::kPublic}));

INSTANTIATE_TEST_SUITE_P(
    Ipv6Registry, DestinationClassTest,
    ::testing::Values(
        Case{"::", C::kUnspecified}, Case{"::1", C::kLoopback}, Case{"::2", C::kIpv4Compatible},
        Case{"64:ff9b::", C::kNat64}, Case{"64:ff9b::ffff:ffff", C::kNat64},
        Case{"64:ff9b::1:0:0", C::kReserved}, Case{"64:ff9b:1::", C::kLocalTranslation},
        Case{"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", C::kLocalTranslation}, Case{"64:ff9b:2::", C::kReserved},
        Case{"100::", C::kDiscard}, Case{"100::ffff:ffff:ffff:ffff", C::kDiscard},
        Case{"100:0:0:1::1", C::kDiscard}, Case{"100:0:0:2::", C::kReserved}, Case{"2001::", C::kTeredo},
        Case{"2001:0:ffff::1", C::kTeredo}, Case{"2001:1::", C::kProtocolAssignments},
        Case{"2001:1::4", C::kProtocolAssignments}, Case{"2001:2::", C::kBenchmarking},
        Case{"2001:2:0:ffff::1", C::kBenchmarking}, Case{"2001:2:1::", C::kProtocolAssignments},
        Case{"2001:4:113::", C::kProtocolAssignments}, Case{"2001:10::1", C::kDeprecated},
        Case{"2001:1f:ffff::1", C::kDeprecated}, Case{"2001:40::", C::kProtocolAssignments},
        Case{"2001:1ff:ffff::1", C::kProtocolAssignments}, Case{"2001:db7:ffff::1", C::kPublic},
        Case{"2001:db8::", C::kDocumentation}, Case{"2001:db8:18::10", C::kDocumentation},
        Case{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C::kDocumentation}, Case{"2001:db9::", C::kPublic},
        Case{"2001:ffff::1", C::kPublic}, Case{"2002::", C::kSixToFour}, Case{"2002:ffff::1", C::kSixToFour},
        Case{"2003::", C::kPublic}, Case{"3fff::", C::kDocumentation}, Case{"3fff:fff::1", C::kDocumentation},
        Case{"3fff:1000::", C::kPublic}, Case{"5f00::1", C::kSegmentRouting}, Case{"fbff::1", C::kReserved},
        Case{"fc00::", C::kPrivate}, Case{"fdff:ffff::1", C::kPrivate}, Case{"fd00:ec2::254", C::kMetadata},
        Case{"fe00::1", C::kReserved}, Case{"fe7f::1", C::kReserved}, Case{"fe80::", C::kLinkLocal},
        Case{"febf:ffff::1", C::kLinkLocal}, Case{"fec0::1", C::kDeprecated}, Case{"feff::1", C::kDeprecated},
        Case{"ff00::", C::kMulticast}, Case{"ff02::1", C::kMulticast}, Case{"ff05::1:3", C::kMulticast},
        // Outside 2000::/3 and not in the registry: reserved by the IETF.
        Case{"1::1", C::kReserved}, Case{"1fff::1", C::kReserved}, Case{"4000::1", C::kReserved},
        Case{"8000::1", C::kReserved}, Case{"e000::1", C::kReserved}, Case{"::ffff:0:a00:1", C::kReserved}));

// IPv4-mapped addresses are their IPv4 address (a connect reaches it); the
// transition forms are refused whatever they carry, public included.
INSTANTIATE_TEST_SUITE_P(
    EmbeddedIpv4, DestinationClassTest,
    ::testing::Values(Case{"::ffff:127.0.0.1", C::kLoopback}, Case{"::ffff:169.254.169.254", C::kMetadata},
                      Case{"::ffff:10.1.2.3", C::kPrivate}, Case{"::ffff:198.19.0.1", C::kBenchmarking},
                      Case{"::ffff:0.0.0.0", C::kUnspecified}, Case{"::ffff:8.8.8.8", C::kPublic},
                      Case{"::127.0.0.1", C::kIpv4Compatible}, Case{"::169.254.169.254", C::kIpv4Compatible},
                      Case{"::8.8.8.8", C::kIpv4Compatible}, Case{"64:ff9b::127.0.0.1", C::kNat64},
                      Case{"64:ff9b::169.254.169.254", C::kNat64}, Case{"64:ff9b::10.0.0.1", C::kNat64},
                      Case{"64:ff9b::8.8.8.8", C::kNat64}, Case{"64:ff9b:1::a00:1", C::kLocalTranslation},
                      Case{"2002:7f00:1::1", C::kSixToFour}, Case{"2002:a9fe:a9fe::1", C::kSixToFour},
                      Case{"2002:c0a8:101::1", C::kSixToFour}, Case{"2002:808:808::1", C::kSixToFour},
                      Case{"2001:0:4136:e378:8000:63bf:3f57:fefe", C::kTeredo},
                      Case{"2001:0:a00:1::1", C::kTeredo}, Case{"2001:0:808:808:0:0:f7f7:f7f7", C::kTeredo}));

// What the audit says: the class, and for a transition form what it carries.
TEST(DestinationDescribe, NamesTheClassAndWhatATransitionFormCarries) {
  auto d = [](const char* text) {
    return describe_destination(classify_destination(*zn::net::IpAddress::parse(text)));
  };
  EXPECT_EQ(d("192.0.2.1"), "special-purpose: documentation");
  EXPECT_EQ(d("::ffff:169.254.169.254"), "special-purpose: metadata");
  EXPECT_EQ(d("2002:a9fe:a9fe::1"), "special-purpose: 6to4 (carries metadata)");
  EXPECT_EQ(d("64:ff9b::7f00:1"), "special-purpose: nat64 (carries loopback)");
  EXPECT_EQ(d("64:ff9b::808:808"), "special-purpose: nat64");
  // Teredo carries two addresses: the server's, and the client's inverted
  // (~0x3f57fefe = 192.168.1.1).
  EXPECT_EQ(d("2001:0:4136:e378:8000:63bf:3f57:fefe"), "special-purpose: teredo (carries private)");
  EXPECT_EQ(d("2001:0:a00:1::ffff:ffff"), "special-purpose: teredo (carries private)");
  EXPECT_TRUE(classify_destination(*zn::net::IpAddress::parse("::ffff:10.0.0.1")).embedded);
}

TEST(AddressPrefix, ParsesStrictlyAndMatchesOnBitBoundaries) {
  for (const char* bad : {"", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/8x", "10.1.0.0/8", "2001:db8::1/32",
                          "::/129", "10.0.0.0/-1", "example.com/8", "10.0.0.0/ 8", "10.0.0.0/08000000000"})
    EXPECT_FALSE(zn::net::AddressPrefix::parse(bad)) << bad;
  auto p = zn::net::AddressPrefix::parse("198.18.0.0/15");
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->contains(*zn::net::IpAddress::parse("198.19.255.255")));
  EXPECT_FALSE(p->contains(*zn::net::IpAddress::parse("198.20.0.0")));
  EXPECT_FALSE(p->contains(*zn::net::IpAddress::parse("::ffff:198.18.0.1")));  // families never mix
  auto host = zn::net::AddressPrefix::parse("198.18.255.1");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->to_string(), "198.18.255.1/32");
  EXPECT_TRUE(host->within(*p));
  EXPECT_FALSE(p->within(*host));
  auto v6 = zn::net::AddressPrefix::parse("2001:db8:18::/48");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->contains(*zn::net::IpAddress::parse("2001:db8:18:ff::1")));
  EXPECT_FALSE(v6->contains(*zn::net::IpAddress::parse("2001:db8:19::1")));
  EXPECT_TRUE(zn::net::AddressPrefix::parse("0.0.0.0/0")->contains(*zn::net::IpAddress::parse("1.2.3.4")));
  EXPECT_EQ(zn::net::unmap_ipv4(*zn::net::IpAddress::parse("::ffff:127.0.0.1")),
            *zn::net::IpAddress::parse("127.0.0.1"));
}

}  // namespace
}  // namespace zn::proxy
