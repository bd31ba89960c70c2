// Sessions in a dense address plan (/30 + /120 per guest, issue 11): slots
// past the lab's 254 get a real TAP with the plan's gateway prefix and a
// datapath entry; the datapath takes indices up to ZN_MAX_SESSIONS-1.
// Runs inside a private network namespace (root).
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "broker/session/registry.h"
#include "broker/session/state_file.h"
#include "common/netns.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/host/named_netns.h"
#include "vmm/host/route_netlink.h"
#include "zn_abi.h"

namespace zn::broker {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPlanPolicy = R"({"policy":{"allow":[{"host":"api.github.com"}]}})";

std::string plan_unique(const std::string& head) {
  static std::mt19937 rng{std::random_device{}()};
  return head + std::to_string(::getpid()) + "x" + std::to_string(rng() % 100000);
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class SessionRegistryPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    netns_ = plan_unique("zsp");
    vmm::create_netns(netns_);
    dir_ = fs::temp_directory_path() / plan_unique("zsp-state");
    fs::create_directories(dir_);
    scope_ = std::make_unique<NetnsScope>(netns_);
    vmm::RouteNetlink().configure_link(vmm::RouteNetlink().link_index("lo"), {});
    datapath_ = dp::Datapath::load({});
    maps_ = std::make_unique<dp::DatapathMaps>(datapath_->map_fds());
    SessionRegistry::Options o;
    o.maps = maps_.get();
    o.ingress_prog_fd = datapath_->ingress_prog_fd();
    o.egress_prog_fd = datapath_->egress_prog_fd();
    o.addresses = vmm::AddressPlan::parse("198.19.0.0/16", "2001:db8:19::/48", 30, 120);
    o.state_path = (dir_ / "sessions.json").string();
    o.host_key = std::make_shared<const HostKey>(HostKey::generate());
    registry_ = std::make_unique<SessionRegistry>(o);
  }
  void TearDown() override {
    registry_.reset();
    maps_.reset();
    datapath_.reset();
    scope_.reset();
    vmm::delete_netns(netns_);
    fs::remove_all(dir_);
  }

  std::string netns_;
  fs::path dir_;
  std::unique_ptr<NetnsScope> scope_;
  std::unique_ptr<dp::Datapath> datapath_;
  std::unique_ptr<dp::DatapathMaps> maps_;
  std::unique_ptr<SessionRegistry> registry_;
};

TEST_F(SessionRegistryPlanTest, SlotsPastTheLabsGetTheirSlashThirty) {
  struct Want {
    unsigned slot;
    const char *gateway4, *guest4, *gateway6, *guest6;
  };
  in_addr guest16000{};
  for (const Want& w :
       {Want{0, "198.19.0.1/30", "198.19.0.2", "2001:db8:19::1/120", "2001:db8:19::2"},
        Want{300, "198.19.4.177/30", "198.19.4.178", "2001:db8:19::1:2c01/120", "2001:db8:19::1:2c02"},
        Want{16000, "198.19.250.1/30", "198.19.250.2", "2001:db8:19::3e:8001/120", "2001:db8:19::3e:8002"}}) {
    SCOPED_TRACE(w.slot);
    const std::string id = "user-" + std::to_string(w.slot);
    Session s = *registry_->create({id, kPlanPolicy, std::nullopt, w.slot});
    EXPECT_EQ(s.record.slot, w.slot);
    EXPECT_EQ(s.record.device, "zn-tap" + std::to_string(w.slot));
    EXPECT_EQ(if_nametoindex(s.record.device.c_str()), static_cast<unsigned>(s.ifindex));
    EXPECT_TRUE(dp::TcAttachment::is_attached(s.ifindex));
    const auto addrs = vmm::RouteNetlink().addresses(s.ifindex);
    EXPECT_TRUE(has(addrs, w.gateway4)) << ::testing::PrintToString(addrs);
    EXPECT_TRUE(has(addrs, w.gateway6)) << ::testing::PrintToString(addrs);
    auto entry = maps_->get_session(s.ifindex);
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->session_idx, s.record.session_idx);
    EXPECT_EQ(net::to_string(in_addr{entry->guest_ip4}), w.guest4);
    EXPECT_EQ(net::to_string(in_addr{entry->gateway_ip4}) + "/30", w.gateway4);
    in6_addr guest6;
    std::copy(std::begin(entry->guest_ip6), std::end(entry->guest_ip6), guest6.s6_addr);
    EXPECT_EQ(net::to_string(guest6), w.guest6);
    if (w.slot == 16000) guest16000 = s.net.guest_ip4;
    auto by_ip = registry_->find_by_guest_ip4(s.net.guest_ip4);
    ASSERT_TRUE(by_ip);
    EXPECT_EQ(by_ip->record.id, id);
  }
  EXPECT_EQ(load_session_records((dir_ / "sessions.json").string()).size(), 3u);

  // The plan's last slot is 16382 (datapath indices 1..16383); past it is refused.
  EXPECT_THROW(registry_->create({"past", kPlanPolicy, std::nullopt, 16383u}), SessionError);
  EXPECT_EQ(if_nametoindex("zn-tap16383"), 0u);

  registry_->remove("user-16000");
  registry_->wait_devices_reaped();
  EXPECT_EQ(if_nametoindex("zn-tap16000"), 0u);
  EXPECT_FALSE(registry_->find_by_guest_ip4(guest16000));
}

TEST_F(SessionRegistryPlanTest, TheDatapathTakesTheLastSessionIndex) {
  Session s = *registry_->create({"user-1", kPlanPolicy, std::nullopt, 16382u});
  dp::SessionEntry e;
  e.session_idx = ZN_MAX_SESSIONS - 1;
  e.guest_mac = s.net.guest_mac;
  e.guest_ip4 = s.net.guest_ip4;
  e.gateway_ip4 = s.net.gateway_ip4;
  maps_->put_session(s.ifindex, e);
  EXPECT_EQ(maps_->get_session(s.ifindex)->session_idx, ZN_MAX_SESSIONS - 1u);
  EXPECT_EQ(maps_->counters(ZN_MAX_SESSIONS - 1)[ZN_DROP_NO_SESSION], 0u);
  EXPECT_EQ(maps_->l4_rule_count(ZN_MAX_SESSIONS - 1), 0u);
  e.session_idx = ZN_MAX_SESSIONS;
  EXPECT_THROW(maps_->put_session(s.ifindex, e), std::invalid_argument);
}

}  // namespace
}  // namespace zn::broker
