#include "userspace/destination_class.h"

#include <gtest/gtest.h>

namespace zn::proxy {
namespace {

struct Case {
  const char* address;
  DestinationClass cls;
  bool embedded;
};

class DestinationClassTest : public ::testing::TestWithParam<Case> {};

TEST_P(DestinationClassTest, Classifies) {
  auto a = dns::IpAddress::parse(GetParam().address);
  ASSERT_TRUE(a) << GetParam().address;
  DestinationVerdict v = classify_destination(*a);
  EXPECT_EQ(destination_class_name(v.cls), destination_class_name(GetParam().cls)) << GetParam().address;
  EXPECT_EQ(v.embedded, GetParam().embedded) << GetParam().address;
  EXPECT_EQ(v.internal(), GetParam().cls != DestinationClass::kPublic) << GetParam().address;
}

using C = DestinationClass;
INSTANTIATE_TEST_SUITE_P(
    All, DestinationClassTest,
    ::testing::Values(
        // IPv4
        Case{"198.18.0.10", C::kPublic, false}, Case{"8.8.8.8", C::kPublic, false},
        Case{"0.0.0.0", C::kUnspecified, false}, Case{"0.1.2.3", C::kUnspecified, false},
        Case{"127.0.0.1", C::kLoopback, false}, Case{"127.255.255.254", C::kLoopback, false},
        Case{"10.0.0.1", C::kPrivate, false}, Case{"172.16.0.1", C::kPrivate, false},
        Case{"172.31.255.255", C::kPrivate, false}, Case{"172.32.0.1", C::kPublic, false},
        Case{"192.168.1.1", C::kPrivate, false}, Case{"169.254.1.1", C::kLinkLocal, false},
        Case{"169.254.169.254", C::kMetadata, false}, Case{"100.64.0.1", C::kCgnat, false},
        Case{"100.127.255.255", C::kCgnat, false}, Case{"100.128.0.1", C::kPublic, false},
        Case{"224.0.0.251", C::kMulticast, false}, Case{"239.255.255.250", C::kMulticast, false},
        Case{"240.0.0.1", C::kReserved, false}, Case{"255.255.255.255", C::kReserved, false},
        // IPv6
        Case{"2001:db8:18::10", C::kPublic, false}, Case{"2606:4700::1111", C::kPublic, false},
        Case{"::", C::kUnspecified, false}, Case{"::1", C::kLoopback, false},
        Case{"fe80::1", C::kLinkLocal, false}, Case{"febf::1", C::kLinkLocal, false},
        Case{"fec0::1", C::kPrivate, false}, Case{"fc00::1", C::kPrivate, false},
        Case{"fd12:3456::1", C::kPrivate, false}, Case{"fd00:ec2::254", C::kMetadata, false},
        Case{"ff02::1", C::kMulticast, false},
        // IPv6 forms carrying an IPv4 address
        Case{"::ffff:169.254.169.254", C::kMetadata, true}, Case{"::ffff:127.0.0.1", C::kLoopback, true},
        Case{"::ffff:10.1.2.3", C::kPrivate, true}, Case{"::ffff:8.8.8.8", C::kPublic, false},
        Case{"::10.1.2.3", C::kPrivate, true}, Case{"64:ff9b::a9fe:a9fe", C::kMetadata, true},
        Case{"64:ff9b::7f00:1", C::kLoopback, true}, Case{"64:ff9b::808:808", C::kPublic, false},
        Case{"64:ff9b:1::1", C::kPrivate, false}, Case{"2002:a9fe:a9fe::1", C::kMetadata, true},
        Case{"2002:c0a8:0101::1", C::kPrivate, true}, Case{"2002:0808:0808::1", C::kPublic, false},
        // Teredo: server 65.54.227.120, client ~(0x3f57fefe) = 192.168.1.1
        Case{"2001:0:4136:e378:8000:63bf:3f57:fefe", C::kPrivate, true},
        // Teredo with a private server address
        Case{"2001:0:0a00:0001::1", C::kPrivate, true}));

}  // namespace
}  // namespace zn::proxy
