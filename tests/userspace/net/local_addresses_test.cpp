// LocalAddresses: the snapshot's lookup, and the watcher applying address,
// route and link notifications one by one to the same table a whole re-read
// gives.
#include "userspace/net/local_addresses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "common/netns.h"
#include "support/test_names.h"
#include "vmm/host/tap_device.h"

namespace zn::net {
namespace {

AddressPrefix prefix(const char* text) { return *AddressPrefix::parse(text); }
IpAddress ip(const char* text) { return *IpAddress::parse(text); }

TEST(LocalSnapshot, FindsTheCoveringPrefixOfAnyLength) {
  LocalSnapshot s;
  s.prefixes = {prefix("127.0.0.0/8"),     prefix("10.1.2.3/32"), prefix("198.19.0.0/30"),
                prefix("2001:db8::1/128"), prefix("fe80::/64"),   prefix("10.1.2.3/32")};
  for (unsigned i = 0; i < 2000; ++i)  // many hosts: the lookup must not depend on their number
    s.prefixes.push_back(
        AddressPrefix{IpAddress::v4({100, 64, static_cast<uint8_t>(i >> 8), static_cast<uint8_t>(i)}), 32});
  s.seal();
  EXPECT_EQ(s.prefixes.size(), 2005u);  // deduplicated
  EXPECT_EQ(s.find(ip("127.8.9.10")), prefix("127.0.0.0/8"));
  EXPECT_EQ(s.find(ip("10.1.2.3")), prefix("10.1.2.3/32"));
  EXPECT_EQ(s.find(ip("::ffff:10.1.2.3")), prefix("10.1.2.3/32"));  // mapped: as IPv4
  EXPECT_EQ(s.find(ip("198.19.0.3")), prefix("198.19.0.0/30"));
  EXPECT_EQ(s.find(ip("100.64.7.207")), prefix("100.64.7.207/32"));
  EXPECT_EQ(s.find(ip("2001:db8::1")), prefix("2001:db8::1/128"));
  EXPECT_EQ(s.find(ip("fe80::1234")), prefix("fe80::/64"));
  // Neighbours of each are not local.
  EXPECT_FALSE(s.find(ip("10.1.2.4")));
  EXPECT_FALSE(s.find(ip("198.19.0.4")));
  EXPECT_FALSE(s.find(ip("100.64.8.0")));
  EXPECT_FALSE(s.find(ip("2001:db8::2")));
  EXPECT_FALSE(s.find(ip("fe81::1")));
  EXPECT_FALSE(s.find(ip("::ffff:10.1.2.4")));
  EXPECT_FALSE(LocalSnapshot{}.find(ip("127.0.0.1")));
}

class LocalAddressesWatch : public ::testing::Test {
 protected:
  void SetUp() override {
    ZN_REQUIRE_ROOT();
    ns_ = std::make_unique<vmm::testing::TestNetns>("lad");
  }
  // Runs `ip` commands in the namespace, one batch (fast, and one process);
  // in a random run some may fail (an address gone with its primary).
  void ip_batch(const std::vector<std::string>& commands, bool must_succeed = true) {
    const std::string file = "/tmp/" + ns_->name() + ".ip";
    {
      std::ofstream out(file);
      for (const auto& c : commands) out << c << "\n";
    }
    const int rc =
        std::system(("ip -n " + ns_->name() + " -force -batch " + file + " >/dev/null 2>&1").c_str());
    std::remove(file.c_str());
    if (must_succeed) {
      ASSERT_EQ(rc, 0);
    }
  }
  // After a random run of adds, deletes, link downs and ups and a deleted
  // link, the table kept from notifications is the one a whole re-read
  // finds, and no re-read happened on the way.
  void incremental_updates_match_a_whole_reread(const std::vector<AddressPrefix>& churning);

  std::unique_ptr<vmm::testing::TestNetns> ns_;
};

// Part of the test's addresses inside churning regions, part outside.
const std::vector<AddressPrefix> kChurning = {prefix("10.66.0.0/17"), prefix("2001:db8:66::/63"),
                                              prefix("fe80::/10")};

TEST_F(LocalAddressesWatch, IncrementalUpdatesMatchAWholeReRead) {
  incremental_updates_match_a_whole_reread({});
}

TEST_F(LocalAddressesWatch, IncrementalUpdatesMatchAWholeReReadWithChurningRegions) {
  incremental_updates_match_a_whole_reread(kChurning);
}

void LocalAddressesWatch::incremental_updates_match_a_whole_reread(
    const std::vector<AddressPrefix>& churning) {
  std::unique_ptr<LocalAddresses> local;
  {
    NetnsScope in(ns_->name());
    for (const char* dev : {"zl0", "zl1", "zl2"}) vmm::create_tap(dev);
    local = std::make_unique<LocalAddresses>(churning);
  }
  ip_batch({"link set lo up"});
  std::vector<std::string> pool;
  for (int i = 0; i < 12; ++i) {
    pool.push_back("10.66." + std::to_string(i % 4 * 64) + "." + std::to_string(1 + i) + "/" +
                   (i % 3 == 0   ? "24"
                    : i % 3 == 1 ? "30"
                                 : "32"));
    pool.push_back("2001:db8:66:" + std::to_string(i % 4) + "::" + std::to_string(1 + i) + "/" +
                   (i % 2 ? "64" : "120"));
  }
  const std::vector<std::string> devs = {"zl0", "zl1", "zl2"};
  std::set<std::pair<std::string, std::string>> present;
  std::mt19937 rng(11);
  for (int round = 0; round < 6; ++round) {
    std::vector<std::string> cmds;
    for (int i = 0; i < 60; ++i) {
      const std::string& a = pool[rng() % pool.size()];
      const std::string& d = devs[rng() % (round < 5 ? devs.size() : 2)];
      if (present.erase({a, d})) {
        cmds.push_back("addr del " + a + " dev " + d);
      } else {
        present.insert({a, d});
        cmds.push_back("addr add " + a + " dev " + d + (a.find(':') != std::string::npos ? " nodad" : ""));
      }
      if (rng() % 20 == 0) cmds.push_back("link set " + d + (rng() % 2 ? " down" : " up"));
    }
    if (round == 4) cmds.push_back("link del zl2");
    ip_batch(cmds, false);
  }
  // The last change: once it shows, every earlier notification was applied
  // (they are read in order).
  ip_batch({"link set zl0 up", "addr add 192.0.2.250/32 dev zl0"});
  for (int i = 0; i < 1000 && !local->find(ip("192.0.2.250")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(local->find(ip("192.0.2.250")));

  std::unique_ptr<LocalAddresses> reread;
  {
    NetnsScope in(ns_->name());
    reread = std::make_unique<LocalAddresses>();  // no churning regions: everything in its snapshot
  }
  std::vector<std::string> got, want;
  for (const auto& p : local->prefixes()) got.push_back(p.to_string());
  for (const auto& p : reread->prefixes()) want.push_back(p.to_string());
  EXPECT_EQ(got, want);
  if (got != want) {
    std::vector<std::string> only_got, only_want;
    std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(only_got));
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(only_want));
    for (const auto& p : only_got) ADD_FAILURE() << "stale: " << p;
    for (const auto& p : only_want) ADD_FAILURE() << "missed: " << p;
    std::system(("ip -n " + ns_->name() + " route show table local; ip -n " + ns_->name() +
                 " -6 route show table local; ip -n " + ns_->name() + " addr")
                    .c_str());
  }
  EXPECT_GT(want.size(), 5u);
  EXPECT_EQ(local->full_reads(), 1u);  // the constructor's only

  // And it keeps following: a delete shows up too.
  ip_batch({"addr del 192.0.2.250/32 dev zl0"});
  for (int i = 0; i < 1000 && local->find(ip("192.0.2.250")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_FALSE(local->find(ip("192.0.2.250")));
}

// Prefixes inside the churning regions are found as soon as their
// notification is read, and publish no snapshot; one outside does.
TEST_F(LocalAddressesWatch, ChurningRegionsChangeInPlaceWithoutAPublish) {
  std::unique_ptr<LocalAddresses> local;
  {
    NetnsScope in(ns_->name());
    vmm::create_tap("zl0");
    local = std::make_unique<LocalAddresses>(kChurning);
  }
  ip_batch({"link set lo up", "link set zl0 up"});
  // The control: outside the regions, a publish (a new generation) shows it.
  ip_batch({"addr add 192.0.2.7/32 dev zl0"});
  for (int i = 0; i < 1000 && !local->find(ip("192.0.2.7")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(local->find(ip("192.0.2.7")));
  const uint64_t generation = local->snapshot()->generation;
  ip_batch({"addr add 10.66.1.1/30 dev zl0", "addr add 2001:db8:66::1/120 dev zl0 nodad"});
  for (int i = 0; i < 1000 && !(local->find(ip("10.66.1.3")) && local->find(ip("2001:db8:66::1"))); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(local->find(ip("10.66.1.1")), prefix("10.66.1.1/32"));
  EXPECT_EQ(local->find(ip("::ffff:10.66.1.1")), prefix("10.66.1.1/32"));
  EXPECT_EQ(local->find(ip("10.66.1.3")), prefix("10.66.1.3/32"));  // the subnet's broadcast
  EXPECT_EQ(local->find(ip("2001:db8:66::1")), prefix("2001:db8:66::1/128"));
  EXPECT_FALSE(local->find(ip("10.66.1.2")));  // the guest's: not this host's
  EXPECT_FALSE(local->find(ip("2001:db8:66::2")));
  EXPECT_EQ(local->snapshot()->generation, generation);
  const auto snapshot = local->snapshot();
  for (const AddressPrefix& p : snapshot->prefixes)
    EXPECT_FALSE(p.within(kChurning[0]) || p.within(kChurning[1])) << p.to_string();
  // And they go as they came.
  ip_batch({"link del zl0"});
  for (int i = 0; i < 1000 && local->find(ip("10.66.1.1")); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_FALSE(local->find(ip("10.66.1.1")));
  EXPECT_FALSE(local->find(ip("2001:db8:66::1")));
}

}  // namespace
}  // namespace zn::net
