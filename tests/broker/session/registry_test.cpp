// Sessions end to end on the host side: TAPs, BPF maps, TC, the state file.
// Runs inside a private network namespace.
#include "broker/session/registry.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "broker/policy/parser.h"
#include "broker/session/sealed_policy.h"
#include "broker/session/state_file.h"
#include "common/netns.h"
#include "support/packet_builder.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/drop_events.h"
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
    hold_reaper(false);  // a failed assertion may have left it held
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
    o.host_key = host_key_;
    o.audit = [this](const std::string& event, const std::string& sid, const nlohmann::json&) {
      audit_.push_back(event + " " + sid);
    };
    // The reaper waits while a test holds it.
    o.before_reap = [this](const std::vector<std::string>&) {
      std::unique_lock lock(hold_mu_);
      hold_cv_.wait(lock, [this] { return !hold_reaper_; });
    };
    return std::make_unique<SessionRegistry>(o);
  }
  void hold_reaper(bool hold) {
    {
      std::lock_guard lock(hold_mu_);
      hold_reaper_ = hold;
    }
    hold_cv_.notify_all();
  }
  std::string state_path() const { return (dir_ / "sessions.json").string(); }

  std::string netns_;
  fs::path dir_;
  std::unique_ptr<NetnsScope> scope_;
  std::unique_ptr<dp::Datapath> datapath_;
  std::unique_ptr<dp::DatapathMaps> maps_;
  std::unique_ptr<SessionRegistry> registry_;
  // One key for every registry a test makes: a restart keeps its key.
  std::shared_ptr<const HostKey> host_key_ = std::make_shared<const HostKey>(HostKey::generate());
  std::vector<std::string> audit_;
  std::mutex hold_mu_;
  std::condition_variable hold_cv_;
  bool hold_reaper_ = false;
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
  // The change is a journal record (the snapshot comes with compaction).
  EXPECT_EQ(fs::status(state_path() + ".journal").permissions() & fs::perms::all,
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
  registry_->wait_devices_reaped();
  EXPECT_EQ(if_nametoindex("zn-tap0"), 0u);
  EXPECT_FALSE(maps_->get_session(s.ifindex));
  EXPECT_EQ(maps_->l4_rule_count(s.record.session_idx), 0u);
  EXPECT_TRUE(load_session_records(state_path()).empty());
}

// Every part that keeps something of a session apart is told of each
// change by the one call that makes it (participant.h): in the order they
// joined as a session comes or changes, in reverse as it goes; before the
// data path finds a new snapshot and after it no longer finds a deleted one;
// a restore is a session coming. A session's own state is one object for
// every snapshot, and a new one for a session re-created under the same id.
struct Recorder : SessionParticipant {
  Recorder(std::string name, std::vector<std::string>& log, SessionRegistry*& registry)
      : name(std::move(name)), log(log), registry(registry) {}
  void note(const std::string& what, const Session& s, bool findable_expected) {
    // What the data path finds at this moment.
    const bool found = registry && registry->find_by_guest_ip4(s.net.guest_ip4) != nullptr;
    log.push_back(name + " " + what + " " + s.record.id + " v" + std::to_string(s.record.policy_version) +
                  (found == findable_expected ? "" : " (findable: " + std::to_string(found) + ")"));
  }
  void session_publishing(const Session* before, const Session& next) override {
    // Before: the data path finds the previous snapshot or nothing.
    note("publishing", next, before != nullptr);
  }
  void session_published(const Session*, const Session& now) override { note("published", now, true); }
  void session_leaving(const Session& s) override { note("leaving", s, true); }
  void session_removed(const Session& s) override { note("removed", s, false); }
  std::string name;
  std::vector<std::string>& log;
  SessionRegistry*& registry;
};

TEST_F(SessionRegistryTest, EachChangeIsOneCallThatTellsEveryParticipantInOrder) {
  std::vector<std::string> log;
  SessionRegistry* live = registry_.get();
  Recorder first("first", log, live), second("second", log, live);
  registry_->add_participant(first);
  registry_->add_participant(second);
  const SessionPtr created = registry_->create({"user-1", kPolicy, {}, {}});
  const SessionPtr updated = registry_->update("user-1", kL4Policy);
  EXPECT_EQ(created->state, updated->state);  // one state for every snapshot
  registry_->remove("user-1");
  EXPECT_EQ(log,
            (std::vector<std::string>{
                "first publishing user-1 v1", "second publishing user-1 v1", "first published user-1 v1",
                "second published user-1 v1", "first publishing user-1 v2", "second publishing user-1 v2",
                "first published user-1 v2", "second published user-1 v2", "second leaving user-1 v2",
                "first leaving user-1 v2", "second removed user-1 v2", "first removed user-1 v2"}));
  // Created again under the same id: a new session with a new state.
  registry_->wait_devices_reaped();
  const SessionPtr again = registry_->create({"user-1", kPolicy, {}, {}});
  EXPECT_NE(again->state, created->state);
  // A refused change tells no one (the control: nothing is told twice).
  log.clear();
  EXPECT_THROW(registry_->update("nobody", kPolicy), SessionError);
  EXPECT_THROW(registry_->remove("nobody"), SessionError);
  EXPECT_TRUE(log.empty());
  // A restart's restore is each session coming.
  registry_ = make_registry();
  live = registry_.get();
  registry_->add_participant(first);
  registry_->restore();
  EXPECT_EQ(log, (std::vector<std::string>{"first publishing user-1 v1", "first published user-1 v1"}));
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
  // Parked, never open: the programs stay, the entry is gone.
  EXPECT_TRUE(dp::TcAttachment::is_attached(ifindex));
  EXPECT_FALSE(maps_->get_session(ifindex));
  EXPECT_TRUE(load_session_records(state_path()).empty());
}

// What an operator is shown as parked is what the kernel has: a device
// with the filters and no session, after a restart too; not a session's
// own device, not one detached, not one gone.
TEST_F(SessionRegistryTest, ParkedDevicesAreListed) {
  const int parked_ifindex = vmm::create_tap("vm-nic0");
  vmm::create_tap("vm-nic1");
  vmm::create_tap("vm-plain");  // never adopted: no filters
  registry_->create({"user-1", kPolicy, std::string("vm-nic0"), {}});
  registry_->create({"user-2", kPolicy, std::string("vm-nic1"), {}});
  registry_->create({"user-3", kPolicy, {}, {}});  // a TAP of zerod's own
  EXPECT_TRUE(registry_->parked().empty());        // the positive control: all are sessions'
  registry_->remove("user-1");
  registry_->remove("user-2", /*detach=*/true);
  auto parked = registry_->parked();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].name, "vm-nic0");
  EXPECT_EQ(parked[0].ifindex, parked_ifindex);
  // A restart knows it from the kernel.
  registry_ = make_registry();
  registry_->restore();
  parked = registry_->parked();
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].name, "vm-nic0");
  // Adopted again: a session's, no longer parked; deleted: gone with it.
  registry_->create({"user-4", kPolicy, std::string("vm-nic0"), {}});
  EXPECT_TRUE(registry_->parked().empty());
  registry_->remove("user-4");
  EXPECT_EQ(registry_->parked().size(), 1u);
  vmm::delete_tap("vm-nic0");
  EXPECT_TRUE(registry_->parked().empty());
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

std::string slurp_state(const std::string& path) {
  std::string all;
  for (const std::string& f : {path, path + ".journal"}) {
    std::ifstream in(f);
    all += std::string(std::istreambuf_iterator<char>(in), {});
  }
  return all;
}

constexpr const char* kSecretPolicy =
    R"({"policy":{"allow":[{"host":"api.stripe.com","identity":"cap:stripe"}]},)"
    R"("resources":{"stripe":{"accessToken":"sk_live_registry_5e2d"}}})";

TEST_F(SessionRegistryTest, AWrongKeyRefusesTheRestoreWithNothingInstalledOrRewritten) {
  Session a = *registry_->create({"user-1", kSecretPolicy, {}, {}});
  EXPECT_EQ(slurp_state(state_path()).find("sk_live_registry_5e2d"), std::string::npos);
  registry_->remove("user-1");
  registry_->wait_devices_reaped();
  Session b = *registry_->create({"user-2", kSecretPolicy, {}, {}});
  const std::string before = slurp_state(state_path());
  maps_->delete_session(b.ifindex);  // as if the maps were new: restore must write them
  // A restart under another key: a refusal, the file untouched, no entry.
  host_key_ = std::make_shared<const HostKey>(HostKey::generate());
  registry_ = make_registry();
  EXPECT_THROW(registry_->restore(), SealedStateError);
  EXPECT_EQ(slurp_state(state_path()), before);
  EXPECT_FALSE(maps_->get_session(b.ifindex));
  EXPECT_EQ(registry_->size(), 0u);
  (void)a;
}

TEST_F(SessionRegistryTest, PlaintextFromBeforeSealingIsSealedAtRestore) {
  SessionRecord r;
  r.id = "user-1";
  r.session_idx = 1;
  r.slot = 0;
  r.device = "zn-tap0";
  r.policy_json = kSecretPolicy;  // a state file written before sealing
  save_session_records(state_path(), {r});
  ASSERT_NE(slurp_state(state_path()).find("sk_live_registry_5e2d"), std::string::npos);
  registry_ = make_registry();
  std::vector<std::string> failed;
  EXPECT_EQ(registry_->restore(&failed).size(), 1u);
  EXPECT_TRUE(failed.empty()) << failed.front();
  const std::string after = slurp_state(state_path());
  EXPECT_EQ(after.find("sk_live_registry_5e2d"), std::string::npos) << after;
  EXPECT_NE(after.find("znsealed:v1:" + host_key_->id()), std::string::npos) << after;
  // What is sealed opens to the same value.
  const SessionPtr s = registry_->get("user-1");
  ASSERT_TRUE(s);
  EXPECT_TRUE(
      s->policy->policy().resources.at("stripe").fields.at("accessToken").equals("sk_live_registry_5e2d"));
}

TEST_F(SessionRegistryTest, ResealAllMovesEveryRecordToTheNewKey) {
  registry_->create({"user-1", kSecretPolicy, {}, {}});
  registry_->create({"user-2", kSecretPolicy, {}, {}});
  const std::string old_id = host_key_->id();
  auto next = std::make_shared<const HostKey>(HostKey::generate());
  registry_->reseal_all(next);
  EXPECT_EQ(registry_->host_key_id(), next->id());
  const std::string after = slurp_state(state_path());
  EXPECT_EQ(after.find(old_id), std::string::npos) << after;
  EXPECT_NE(after.find(next->id()), std::string::npos) << after;
  // A restart under the new key opens both; a new record is sealed under it.
  host_key_ = next;
  registry_ = make_registry();
  EXPECT_EQ(registry_->restore().size(), 2u);
  registry_->create({"user-3", kSecretPolicy, {}, {}});
  EXPECT_EQ(slurp_state(state_path()).find(old_id), std::string::npos);
}

// Frames the guest writes into its TAP, and what the datapath made of each:
// real programs on a real device.
class GuestFrames {
 public:
  GuestFrames(dp::DatapathMaps& maps, int events_fd, const std::string& device, const vmm::GuestNetwork& net)
      : maps_(maps),
        ifindex_(static_cast<uint32_t>(if_nametoindex(device.c_str()))),
        fd_(vmm::open_tap(device)),
        // An ARP reply to the gateway: passed while a session holds the
        // device, and the host sends nothing back (a request would be
        // answered, counted again).
        frame_(test::eth(net.guest_mac, net.host_mac, 0x0806,
                         test::arp(2, net.guest_mac, net.guest_ip4, net.host_mac, net.gateway_ip4))),
        events_(events_fd, [this](const zn_drop_event& e) { note(e); }) {
    events_.drain();
  }
  uint64_t passed(uint32_t session_idx) const { return maps_.counters(session_idx)[ZN_PASS_ARP]; }
  // Frames from the guest dropped as "no session" on this device. Not
  // the no-session counter: that is shared by every device and both
  // directions, and the kernel's own IPv6 frames out of the TAP (DAD, MLD,
  // router solicitations, sent when the carrier comes up) are dropped there
  // too, as no session's, on the way out (a CI run counted 2 for one frame).
  uint64_t unowned() {
    events_.drain();
    return unowned_;
  }
  // Writes one frame; how much `counted` grew once it moved (or after 1 s).
  template <typename Counted>
  uint64_t send_and_count(Counted&& counted) {
    const uint64_t before = counted();
    EXPECT_EQ(::write(fd_.get(), frame_.data(), frame_.size()), static_cast<ssize_t>(frame_.size()));
    for (int i = 0; i < 500 && counted() == before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return counted() - before;
  }
  // The VMM lets go of the device.
  void close() { fd_.reset(); }

 private:
  void note(const zn_drop_event& e) {
    if (e.reason == ZN_DROP_NO_SESSION && e.direction == 0 /* from the guest */ && e.ifindex == ifindex_)
      ++unowned_;  // (a frame of no session is not parsed: no ethertype)
  }
  dp::DatapathMaps& maps_;
  uint32_t ifindex_;
  net::UniqueFd fd_;
  test::Bytes frame_;
  uint64_t unowned_ = 0;
  dp::DropEventReader events_;
};

// Delete is fail closed: from the moment remove() starts, the guest's frames
// are dropped as "no session", though the TAP itself is reaped later, off the
// control lock.
TEST_F(SessionRegistryTest, RemoveDropsTheGuestsTrafficBeforeTheTapGoes) {
  Session s = *registry_->create({"user-1", kPolicy, {}, {}});
  GuestFrames guest(*maps_, datapath_->events_fd(), s.record.device, s.net);  // the VMM's end
  // Positive control: while the session lives, the frame is the session's.
  EXPECT_EQ(guest.send_and_count([&] { return guest.passed(s.record.session_idx); }), 1u);
  EXPECT_EQ(guest.unowned(), 0u);

  hold_reaper(true);
  registry_->remove("user-1");
  // Gone from the registry and the datapath, the device still there and
  // still under the programs: what it carries is dropped.
  EXPECT_FALSE(registry_->get("user-1"));
  EXPECT_FALSE(maps_->get_session(s.ifindex));
  EXPECT_EQ(if_nametoindex(s.record.device.c_str()), static_cast<unsigned>(s.ifindex));
  EXPECT_TRUE(dp::TcAttachment::is_attached(s.ifindex));
  EXPECT_EQ(guest.send_and_count([&] { return guest.unowned(); }), 1u);
  guest.close();
  hold_reaper(false);
  registry_->wait_devices_reaped();
  EXPECT_EQ(if_nametoindex(s.record.device.c_str()), 0u);
}

// Deleting a session on an adopted device never opens the device: it is
// parked (programs on, no entry), so the guest's frames are dropped as "no
// session" after the delete as they were passed before it.
TEST_F(SessionRegistryTest, AnAdoptedDeviceStaysDenyingAfterItsSessionIsDeleted) {
  const std::string dev = unique("vp");
  const int ifindex = vmm::create_tap(dev);
  Session s = *registry_->create({"user-1", kPolicy, dev, 2u});
  GuestFrames guest(*maps_, datapath_->events_fd(), dev, s.net);
  // Positive control: the session's frame passes.
  EXPECT_EQ(guest.send_and_count([&] { return guest.passed(s.record.session_idx); }), 1u);

  registry_->remove("user-1");
  EXPECT_EQ(guest.send_and_count([&] { return guest.unowned(); }), 1u);
  EXPECT_TRUE(dp::TcAttachment::is_attached(ifindex));
  EXPECT_EQ(audit_.back(), "session:delete user-1");

  // Across a restart of zerod (a new registry over the same pinned maps),
  // the parked device still denies: nothing in the state file needed.
  registry_.reset();
  registry_ = make_registry();
  registry_->restore();
  EXPECT_EQ(guest.send_and_count([&] { return guest.unowned(); }), 1u);
  EXPECT_TRUE(dp::TcAttachment::is_attached(ifindex));

  // Adopted again: the new session's entry and programs take over, and its
  // frames pass (the same device, another slot and index).
  Session again = *registry_->create({"user-2", kPolicy, dev, 2u});
  EXPECT_EQ(again.ifindex, ifindex);
  EXPECT_EQ(guest.send_and_count([&] { return guest.passed(again.record.session_idx); }), 1u);
  registry_->remove("user-2");
  EXPECT_EQ(guest.send_and_count([&] { return guest.unowned(); }), 1u);
  vmm::delete_tap(dev);
}

// Detaching is the operator's explicit choice: only then do the programs
// go, and the device is no longer ours (nothing counts its frames).
TEST_F(SessionRegistryTest, DetachIsAnExplicitChoiceOnDelete) {
  const std::string dev = unique("vd");
  const int ifindex = vmm::create_tap(dev);
  Session s = *registry_->create({"user-1", kPolicy, dev, 4u});
  GuestFrames guest(*maps_, datapath_->events_fd(), dev, s.net);
  EXPECT_EQ(guest.send_and_count([&] { return guest.passed(s.record.session_idx); }), 1u);
  registry_->remove("user-1", /*detach=*/true);
  EXPECT_FALSE(dp::TcAttachment::is_attached(ifindex));
  EXPECT_FALSE(maps_->get_session(ifindex));
  EXPECT_EQ(if_nametoindex(dev.c_str()), static_cast<unsigned>(ifindex));
  // `detach` means nothing for a TAP zerod made: it is deleted either way.
  Session own = *registry_->create({"user-2", kPolicy, {}, {}});
  registry_->remove("user-2", /*detach=*/true);
  registry_->wait_devices_reaped();
  EXPECT_EQ(if_nametoindex(own.record.device.c_str()), 0u);
  vmm::delete_tap(dev);
}

// A parked device that disappears takes its filters with it; a new device
// of the same name is a stranger, not governed until adopted.
TEST_F(SessionRegistryTest, AParkedDeviceThatDisappearsLeavesNothingBehind) {
  const std::string dev = unique("vg");
  vmm::create_tap(dev);
  Session s = *registry_->create({"user-1", kPolicy, dev, 5u});
  registry_->remove("user-1");
  EXPECT_TRUE(dp::TcAttachment::is_attached(s.ifindex));
  ASSERT_TRUE(vmm::delete_tap(dev));
  const int reborn = vmm::create_tap(dev);
  EXPECT_NE(reborn, s.ifindex);
  EXPECT_FALSE(dp::TcAttachment::is_attached(reborn));
  // And it can be adopted like any device.
  Session again = *registry_->create({"user-2", kPolicy, dev, 5u});
  EXPECT_TRUE(dp::TcAttachment::is_attached(reborn));
  registry_->remove("user-2");
  vmm::delete_tap(dev);
}

// The slot of a TAP being reaped is taken until it is gone (its name and
// addresses are the slot's), and a create asking for it waits rather than
// fails.
TEST_F(SessionRegistryTest, ASlotIsReusedOnlyOnceItsTapIsGone) {
  registry_->create({"user-1", kPolicy, {}, {}});
  hold_reaper(true);
  registry_->remove("user-1");
  Session other = *registry_->create({"user-2", kPolicy, {}, {}});
  EXPECT_EQ(other.record.slot, 1u);  // slot 0's TAP is still there
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hold_reaper(false);
  });
  Session again = *registry_->create({"user-3", kPolicy, {}, 0u});
  release.join();
  EXPECT_EQ(again.record.slot, 0u);
  EXPECT_EQ(again.record.device, "zn-tap0");
  EXPECT_TRUE(maps_->get_session(again.ifindex));
}

// Every change is one journal record; a restart replays snapshot + journal to
// the same sessions, and a compaction along the way changes nothing.
TEST_F(SessionRegistryTest, TheJournalRestoresTheSameSessionsAcrossCompactions) {
  std::map<std::string, uint64_t> want;
  for (int i = 0; i < 40; ++i) {
    const std::string id = "s" + std::to_string(i);
    registry_->create({id, kPolicy, {}, {}});
    want[id] = 1;
  }
  for (int round = 0; round < 4; ++round)
    for (int i = 0; i < 40; i += 2) {
      const std::string id = "s" + std::to_string(i);
      registry_->update(id, round % 2 ? kPolicy : kL4Policy);
      want[id] += 1;
    }
  for (int i = 1; i < 40; i += 4) {
    registry_->remove("s" + std::to_string(i));
    want.erase("s" + std::to_string(i));
  }
  // 40 + 80 + 10 changes: past the first compaction (2 x 64 records).
  EXPECT_TRUE(fs::exists(state_path()));
  EXPECT_LT(StateFile(state_path()).load().size(), 41u);
  std::map<std::string, uint64_t> got;
  for (const auto& r : load_session_records(state_path())) got[r.id] = r.policy_version;
  EXPECT_EQ(got, want);

  registry_->wait_devices_reaped();
  registry_ = make_registry();
  std::vector<std::string> failed;
  EXPECT_EQ(registry_->restore(&failed).size(), want.size());
  EXPECT_TRUE(failed.empty());
  for (const auto& [id, version] : want) {
    auto s = registry_->get(id);
    ASSERT_TRUE(s) << id;
    EXPECT_EQ(s->record.policy_version, version);
    EXPECT_TRUE(maps_->get_session(s->ifindex)) << id;
  }
}

}  // namespace
}  // namespace zn::broker
