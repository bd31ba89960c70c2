// Attaching to a TAP's TC hooks. clsact (the default): tolerate a qdisc
// someone else made, remove only what we made, replace our own filters in
// place, an earlier start's TCX programs found and removed. TCX (tc_attach
// "tcx", Linux 6.6+): no qdisc, ours first, replaced in place, never anyone
// else's program touched, an earlier start's clsact filters removed.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <string>
#include <vector>

#include "common/netns.h"
#include "integration/guest_commands.h"
#include "integration/lab_datapath.h"
#include "support/skip_policy.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/lab/lab.h"

namespace zn::test {
namespace {

constexpr int kTcxIngress = 46;  // BPF_TCX_INGRESS (Linux 6.6 uapi)
constexpr int kTcxEgress = 47;   // BPF_TCX_EGRESS

// What runs on a TCX hook, in order, as program names: read here with the
// kernel's query, independently of TcAttachment.
std::vector<std::string> tcx_programs(int ifindex, int type) {
  std::array<uint32_t, 16> ids{};
  struct bpf_prog_query_opts q {};
  q.sz = sizeof(q);
  q.prog_ids = ids.data();
  q.prog_cnt = ids.size();
  std::vector<std::string> names;
  if (bpf_prog_query_opts(ifindex, static_cast<bpf_attach_type>(type), &q) != 0) return {"query failed"};
  for (uint32_t i = 0; i < q.prog_cnt; ++i) {
    const int fd = bpf_prog_get_fd_by_id(ids[i]);
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    names.push_back(fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.name : "?");
    if (fd >= 0) ::close(fd);
  }
  return names;
}

// Someone else's program (zeroness's passthrough object stands in), loaded
// into this process and appended to a TCX hook.
class ForeignProgram {
 public:
  ForeignProgram() {
    obj_ = bpf_object__open_file(ZN_PASSTHROUGH_BPF_OBJ, nullptr);
    if (!obj_ || bpf_object__load(obj_) != 0) throw std::runtime_error("load " ZN_PASSTHROUGH_BPF_OBJ);
    fd_ = bpf_program__fd(bpf_object__find_program_by_name(obj_, "zn_passthrough"));
  }
  ~ForeignProgram() { bpf_object__close(obj_); }
  ForeignProgram(const ForeignProgram&) = delete;
  ForeignProgram& operator=(const ForeignProgram&) = delete;
  int attach(int ifindex, int type) const {
    return bpf_prog_attach_opts(fd_, ifindex, static_cast<bpf_attach_type>(type), nullptr);
  }

 private:
  bpf_object* obj_ = nullptr;
  int fd_ = -1;
};

class TcAttachmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dp::TcAttachment::tcx_supported())
      GTEST_SKIP() << ZN_KERNEL_LACKS("TCX") << "tc_attach \"tcx\" cannot be used here";
    dp::TcAttachment::use_backend(dp::TcBackend::kTcx);
    set_up_lab();
  }
  void TearDown() override { dp::TcAttachment::use_backend(dp::TcBackend::kClsact); }
  void set_up_lab() {
    lab_ = std::make_unique<vmm::Lab>(vmm::Lab::up(unique_lab_prefix("za")));
    tap_ = lab_->add_guest("g0");
    NetnsScope in_host(lab_->host_netns());
    datapath_ = dp::Datapath::load({});
  }
  // `tc OBJECT VERB dev TAP REST...`
  std::string tc(const std::string& object_verb, const std::string& rest = "") {
    return run_in_netns(lab_->host_netns(), "tc " + object_verb + " dev " + tap_.tap_name + " " + rest)
        .output;
  }
  dp::TcAttachment attach(const dp::Datapath& datapath) {
    NetnsScope in_host(lab_->host_netns());
    return dp::TcAttachment::attach(tap_.tap_ifindex, datapath.ingress_prog_fd(), datapath.egress_prog_fd());
  }
  dp::TcAttachment attach() { return attach(*datapath_); }
  void detach(dp::TcAttachment& a) {
    NetnsScope in_host(lab_->host_netns());
    a.detach();
  }
  static size_t count(const std::string& haystack, const std::string& needle) {
    size_t n = 0;
    for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1))
      ++n;
    return n;
  }
  std::vector<std::string> ingress() {
    NetnsScope in_host(lab_->host_netns());
    return tcx_programs(tap_.tap_ifindex, kTcxIngress);
  }
  std::vector<std::string> egress() {
    NetnsScope in_host(lab_->host_netns());
    return tcx_programs(tap_.tap_ifindex, kTcxEgress);
  }
  bool attached() {
    NetnsScope in_host(lab_->host_netns());
    return dp::TcAttachment::is_attached(tap_.tap_ifindex);
  }

  std::unique_ptr<vmm::Lab> lab_;
  vmm::LabGuest tap_;
  std::unique_ptr<dp::Datapath> datapath_;
};

using Names = std::vector<std::string>;

TEST_F(TcAttachmentTest, AttachesToTheTcxHooksWithNoQdisc) {
  EXPECT_EQ(ingress(), Names{});
  EXPECT_FALSE(attached());
  auto a = attach();
  EXPECT_EQ(ingress(), Names{"zn_tap_ingress"});
  EXPECT_EQ(egress(), Names{"zn_tap_egress"});
  EXPECT_TRUE(attached());
  EXPECT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
  detach(a);
  EXPECT_EQ(ingress(), Names{});
  EXPECT_EQ(egress(), Names{});
  EXPECT_FALSE(attached());
}

// A program attached before ours never decides ahead of it, and survives our
// detach; so does someone else's clsact filter.
TEST_F(TcAttachmentTest, OursRunsFirstAndForeignProgramsSurviveDetach) {
  std::unique_ptr<ForeignProgram> foreign;
  {
    NetnsScope in_host(lab_->host_netns());
    foreign = std::make_unique<ForeignProgram>();
    ASSERT_EQ(foreign->attach(tap_.tap_ifindex, kTcxIngress), 0);
  }
  tc("qdisc add", "clsact");
  tc("filter add", "ingress prio 7 bpf da obj " ZN_PASSTHROUGH_BPF_OBJ " sec tc");
  ASSERT_EQ(ingress(), Names{"zn_passthrough"});  // the control: the foreign one is on
  auto a = attach();
  EXPECT_EQ(ingress(), (Names{"zn_tap_ingress", "zn_passthrough"}));
  detach(a);
  EXPECT_EQ(ingress(), Names{"zn_passthrough"});
  EXPECT_NE(tc("filter show", "ingress").find("zn_passthrough"), std::string::npos);
}

// A restarted zerod loads new programs: attaching them replaces the old ones
// where they stand, never leaving two of ours or none.
TEST_F(TcAttachmentTest, AttachingAgainReplacesOursInPlace) {
  attach().release();
  std::unique_ptr<dp::Datapath> restarted;
  {
    NetnsScope in_host(lab_->host_netns());
    restarted = dp::Datapath::load({});
  }
  auto again = attach(*restarted);
  EXPECT_EQ(ingress(), Names{"zn_tap_ingress"});
  EXPECT_EQ(egress(), Names{"zn_tap_egress"});
  {
    NetnsScope in_host(lab_->host_netns());
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    ASSERT_EQ(bpf_obj_get_info_by_fd(restarted->ingress_prog_fd(), &info, &len), 0);
    std::array<uint32_t, 4> ids{};
    struct bpf_prog_query_opts q {};
    q.sz = sizeof(q);
    q.prog_ids = ids.data();
    q.prog_cnt = ids.size();
    ASSERT_EQ(bpf_prog_query_opts(tap_.tap_ifindex, static_cast<bpf_attach_type>(kTcxIngress), &q), 0);
    EXPECT_EQ(ids[0], info.id);  // the new program, not the old
  }
  auto same = attach(*restarted);  // the very same programs again: nothing changes
  EXPECT_EQ(ingress(), Names{"zn_tap_ingress"});
  same.release();
  detach(again);
  EXPECT_FALSE(attached());
}

// A start with the clsact backend attached filters (handle 0x2a, priority
// 1): a device it parked still counts as ours, and its filters can be
// removed; someone else's filter at another priority stays.
TEST_F(TcAttachmentTest, ClsactFiltersOfAnEarlierStartAreFoundAndRemoved) {
  tc("qdisc add", "clsact");
  tc("filter add", "ingress prio 1 handle 0x2a bpf da obj " ZN_PASSTHROUGH_BPF_OBJ " sec tc");
  tc("filter add", "egress prio 1 handle 0x2a bpf da obj " ZN_PASSTHROUGH_BPF_OBJ " sec tc");
  tc("filter add", "ingress prio 7 bpf da obj " ZN_PASSTHROUGH_BPF_OBJ " sec tc");
  EXPECT_TRUE(attached());
  {
    NetnsScope in_host(lab_->host_netns());
    EXPECT_TRUE(dp::TcAttachment::remove_other_backend(tap_.tap_ifindex));
    EXPECT_FALSE(dp::TcAttachment::remove_other_backend(tap_.tap_ifindex));
  }
  EXPECT_FALSE(attached());
  EXPECT_EQ(tc("filter show", "egress").find("handle 0x2a"), std::string::npos);
  const std::string left = tc("filter show", "ingress");
  EXPECT_EQ(left.find("handle 0x2a"), std::string::npos) << left;
  EXPECT_NE(left.find("pref 7"), std::string::npos) << left;
}

TEST_F(TcAttachmentTest, AttachingToAMissingInterfaceFailsClearly) {
  NetnsScope in_host(lab_->host_netns());
  try {
    dp::TcAttachment::attach(999999, datapath_->ingress_prog_fd(), datapath_->egress_prog_fd());
    FAIL() << "attached to a missing interface";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ifindex 999999"), std::string::npos) << e.what();
  }
}

// The default backend.
class TcAttachmentClsactTest : public TcAttachmentTest {
 protected:
  void SetUp() override {
    dp::TcAttachment::use_backend(dp::TcBackend::kClsact);
    set_up_lab();
  }
};

TEST_F(TcAttachmentClsactTest, QdiscWeCreatedGoesAwayOnDetach) {
  ASSERT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
  auto a = attach();
  EXPECT_TRUE(a.created_qdisc());
  EXPECT_NE(tc("qdisc show").find("clsact"), std::string::npos);
  EXPECT_NE(tc("filter show", "ingress").find("zn_tap_ingress"), std::string::npos);
  EXPECT_NE(tc("filter show", "egress").find("zn_tap_egress"), std::string::npos);
  EXPECT_EQ(ingress(), Names{});  // nothing on TCX
  EXPECT_TRUE(attached());
  detach(a);
  EXPECT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
  EXPECT_FALSE(attached());
}

TEST_F(TcAttachmentClsactTest, ForeignQdiscAndFiltersSurviveDetach) {
  tc("qdisc add", "clsact");
  // Someone else's classifier (this kernel has no matchall/u32: a BPF one).
  tc("filter add", "ingress prio 7 bpf da obj " ZN_PASSTHROUGH_BPF_OBJ " sec tc");
  auto a = attach();
  EXPECT_FALSE(a.created_qdisc());
  detach(a);
  EXPECT_NE(tc("qdisc show").find("clsact"), std::string::npos);
  const std::string filters = tc("filter show", "ingress");
  EXPECT_NE(filters.find("zn_passthrough"), std::string::npos) << filters;
  EXPECT_EQ(filters.find("zn_tap_ingress"), std::string::npos) << filters;
}

TEST_F(TcAttachmentClsactTest, AttachingAgainReplacesOurFilterInPlace) {
  attach().release();
  auto again = attach();
  const std::string filters = tc("filter show", "ingress");
  EXPECT_EQ(count(filters, "handle 0x2a"), 1u) << filters;
  EXPECT_TRUE(attached());
  {
    NetnsScope in_host(lab_->host_netns());
    EXPECT_FALSE(dp::TcAttachment::remove_other_backend(tap_.tap_ifindex));  // they are ours here
  }
  EXPECT_TRUE(attached());
  detach(again);
  EXPECT_FALSE(attached());
}

// A start configured with "tcx" left its programs on a device: this start's
// filters go on, then the TCX ones (which run before any filter) come off.
TEST_F(TcAttachmentClsactTest, TcxProgramsOfAnEarlierStartAreRemoved) {
  if (!dp::TcAttachment::tcx_supported()) GTEST_SKIP() << ZN_KERNEL_LACKS("TCX") << "nothing to leave behind";
  dp::TcAttachment::use_backend(dp::TcBackend::kTcx);
  attach().release();
  dp::TcAttachment::use_backend(dp::TcBackend::kClsact);
  ASSERT_EQ(ingress(), Names{"zn_tap_ingress"});  // the control: the earlier start's are on
  auto a = attach();
  EXPECT_EQ(ingress(), Names{"zn_tap_ingress"});  // still there until removed
  {
    NetnsScope in_host(lab_->host_netns());
    EXPECT_TRUE(dp::TcAttachment::remove_other_backend(tap_.tap_ifindex));
    EXPECT_FALSE(dp::TcAttachment::remove_other_backend(tap_.tap_ifindex));
  }
  EXPECT_EQ(ingress(), Names{});
  EXPECT_EQ(egress(), Names{});
  EXPECT_NE(tc("filter show", "ingress").find("zn_tap_ingress"), std::string::npos);
  EXPECT_TRUE(attached());
  detach(a);
  EXPECT_FALSE(attached());
}

}  // namespace
}  // namespace zn::test
