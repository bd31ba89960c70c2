// Sessions end to end on the host side: TAPs, BPF maps, TC, the state file.
// Runs inside a private network namespace.
#include "broker/session/registry.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "broker/policy/parser.h"
#include "broker/session/state_file.h"
#include "common/netns.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/host/named_netns.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/tap_device.h"

namespace zn::broker {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPolicy = R"({"policy":{"allow":[{"host":"api.github.com"}]}})";
constexpr const char* kL4Policy =
    R"({"policy":{"allow":[{"host":"api.github.com"},{"host":"198.18.0.20","port":5432}]}})";

std::string unique(const std::string& head) {
  static std::mt19937 rng{std::random_device{}()};
  return head + std::to_string(::getpid()) + "x" + std::to_string(rng() % 100000);
}

class SessionRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    netns_ = unique("zsr");
    vmm::create_netns(netns_);
    dir_ = fs::temp_directory_path() / unique("zsr-state");
    fs::create_directories(dir_);
    scope_ = std::make_unique<NetnsScope>(netns_);
    vmm::RouteNetlink().configure_link(vmm::RouteNetlink().link_index("lo"), {});
    datapath_ = dp::Datapath::load({});
    maps_ = std::make_unique<dp::DatapathMaps>(datapath_->map_fds());
    registry_ = make_registry();
  }
  void TearDown() override {
    registry_.reset();
    maps_.reset();
    datapath_.reset();
    scope_.reset();
    vmm::delete_netns(netns_);
    fs::remove_all(dir_);
  }
  std::unique_ptr<SessionRegistry> make_registry() {
    SessionRegistry::Options o;
    o.maps = maps_.get();
    o.ingress_prog_fd = datapath_->ingress_prog_fd();
    o.egress_prog_fd = datapath_->egress_prog_fd();
    o.state_path = (dir_ / "sessions.json").string();
    o.audit = [this](const std::string& event, const std::string& sid, const nlohmann::json&) {
      audit_.push_back(event + " " + sid);
    };
    return std::make_unique<SessionRegistry>(o);
  }
  std::string state_path() const { return (dir_ / "sessions.json").string(); }

  std::string netns_;
  fs::path dir_;
  std::unique_ptr<NetnsScope> scope_;
  std::unique_ptr<dp::Datapath> datapath_;
  std::unique_ptr<dp::DatapathMaps> maps_;
  std::unique_ptr<SessionRegistry> registry_;
  std::vector<std::string> audit_;
};

TEST_F(SessionRegistryTest, CreateMakesATapUnderTheDatapathAndPersists) {
  Session s = *registry_->create({"user-1", kPolicy, std::nullopt, std::nullopt});
  EXPECT_EQ(s.record.device, "zn-tap0");
  EXPECT_EQ(s.record.session_idx, 1u);
  EXPECT_EQ(if_nametoindex("zn-tap0"), static_cast<unsigned>(s.ifindex));
  EXPECT_TRUE(dp::TcAttachment::is_attached(s.ifindex));
  auto entry = maps_->get_session(s.ifindex);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->guest_ip4, s.net.guest_ip4.s_addr);
  auto addrs = vmm::RouteNetlink().addresses(s.ifindex);
  EXPECT_NE(std::find(addrs.begin(), addrs.end(), "198.19.0.1/24"), addrs.end());
  auto records = load_session_records(state_path());
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].id, "user-1");
  EXPECT_EQ(fs::status(state_path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(audit_, std::vector<std::string>{"session:create user-1"});
  auto by_ip = registry_->find_by_guest_ip4(s.net.guest_ip4);
  ASSERT_TRUE(by_ip);
  EXPECT_EQ(by_ip->record.id, "user-1");
}

TEST_F(SessionRegistryTest, RefusedRequestsChangeNothing) {
  EXPECT_THROW(registry_->create({"User 1", kPolicy, {}, {}}), SessionError);
  EXPECT_THROW(registry_->create({"user-1", R"({"policy":{"allow":[{"host":"*.com"}]}})", {}, {}}),
               PolicyError);
  EXPECT_THROW(registry_->create({"user-1", kPolicy, std::string("nosuchdev"), {}}), SessionError);
  EXPECT_EQ(if_nametoindex("zn-tap0"), 0u);
  EXPECT_TRUE(registry_->list().empty());
  EXPECT_TRUE(load_session_records(state_path()).empty());
  registry_->create({"user-1", kPolicy, {}, {}});
  EXPECT_THROW(registry_->create({"user-1", kPolicy, {}, {}}), SessionError);
  EXPECT_THROW(registry_->create({"user-2", kPolicy, {}, 0u}), SessionError);  // slot taken
  EXPECT_THROW(registry_->update("user-1", "{"), PolicyError);
  EXPECT_EQ(registry_->get("user-1")->record.policy_version, 1u);
  EXPECT_THROW(registry_->remove("nobody"), SessionError);
}

TEST_F(SessionRegistryTest, UpdateMovesL4RulesAndBumpsTheVersion) {
  Session s = *registry_->create({"user-1", kPolicy, {}, {}});
  EXPECT_EQ(maps_->l4_rule_count(s.record.session_idx), 0u);
  Session u = *registry_->update("user-1", kL4Policy);
  EXPECT_EQ(u.record.policy_version, 2u);
  EXPECT_EQ(maps_->l4_rule_count(s.record.session_idx), 1u);
  EXPECT_EQ(load_session_records(state_path())[0].policy_version, 2u);
  registry_->update("user-1", kPolicy);
  EXPECT_EQ(maps_->l4_rule_count(s.record.session_idx), 0u);
}

TEST_F(SessionRegistryTest, RemoveDeletesOurTapAndEveryMapEntry) {
  Session s = *registry_->create({"user-1", kL4Policy, {}, {}});
  registry_->remove("user-1");
  EXPECT_EQ(if_nametoindex("zn-tap0"), 0u);
  EXPECT_FALSE(maps_->get_session(s.ifindex));
  EXPECT_EQ(maps_->l4_rule_count(s.record.session_idx), 0u);
  EXPECT_TRUE(load_session_records(state_path()).empty());
}

TEST_F(SessionRegistryTest, AdoptedDevicesAreKeptOnRemove) {
  int ifindex = vmm::create_tap("vm-nic0");
  Session s = *registry_->create({"user-1", kPolicy, std::string("vm-nic0"), 3u});
  EXPECT_TRUE(s.record.adopted);
  EXPECT_EQ(s.ifindex, ifindex);
  EXPECT_EQ(s.record.slot, 3u);
  EXPECT_EQ(zn::net::to_string(s.net.guest_ip4), "198.19.3.2");
  EXPECT_TRUE(dp::TcAttachment::is_attached(ifindex));
  registry_->remove("user-1");
  EXPECT_EQ(if_nametoindex("vm-nic0"), static_cast<unsigned>(ifindex));
  EXPECT_FALSE(dp::TcAttachment::is_attached(ifindex));
}

TEST_F(SessionRegistryTest, RestoreReadoptsTapsAndRecreatesLostOnes) {
  Session a = *registry_->create({"user-1", kL4Policy, {}, {}});
  Session b = *registry_->create({"user-2", kPolicy, {}, {}});
  // A restart: a new registry over the same (pinned, in real life) maps.
  registry_ = make_registry();
  vmm::delete_tap(b.record.device);  // lost while zerod was down
  std::vector<std::string> failed;
  auto restored = registry_->restore(&failed);
  EXPECT_TRUE(failed.empty()) << failed.front();
  EXPECT_EQ(restored.size(), 2u);
  auto ra = registry_->get("user-1");
  ASSERT_TRUE(ra);
  EXPECT_EQ(ra->ifindex, a.ifindex);  // kept, not re-created
  EXPECT_EQ(maps_->l4_rule_count(a.record.session_idx), 1u);
  auto rb = registry_->get("user-2");
  ASSERT_TRUE(rb);
  EXPECT_NE(if_nametoindex("zn-tap1"), 0u);
  EXPECT_TRUE(dp::TcAttachment::is_attached(rb->ifindex));
  EXPECT_TRUE(maps_->get_session(rb->ifindex));
}

}  // namespace
}  // namespace zn::broker
