// Attaching to a TAP's clsact hooks: tolerate a qdisc someone else made,
// remove only what we made, replace our own filters in place.
#include <gtest/gtest.h>

#include <string>

#include "common/netns.h"
#include "integration/guest_commands.h"
#include "integration/lab_datapath.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/lab/lab.h"

namespace zn::test {
namespace {

class TcAttachmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
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
  static size_t count(const std::string& haystack, const std::string& needle) {
    size_t n = 0;
    for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1))
      ++n;
    return n;
  }
  dp::TcAttachment attach() {
    NetnsScope in_host(lab_->host_netns());
    return dp::TcAttachment::attach(tap_.tap_ifindex, datapath_->ingress_prog_fd(),
                                    datapath_->egress_prog_fd());
  }
  void detach(dp::TcAttachment& a) {
    NetnsScope in_host(lab_->host_netns());
    a.detach();
  }

  std::unique_ptr<vmm::Lab> lab_;
  vmm::LabGuest tap_;
  std::unique_ptr<dp::Datapath> datapath_;
};

TEST_F(TcAttachmentTest, QdiscWeCreatedGoesAwayOnDetach) {
  ASSERT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
  auto a = attach();
  EXPECT_TRUE(a.created_qdisc());
  EXPECT_NE(tc("qdisc show").find("clsact"), std::string::npos);
  EXPECT_NE(tc("filter show", "ingress").find("zn_tap_ingress"), std::string::npos);
  EXPECT_NE(tc("filter show", "egress").find("zn_tap_egress"), std::string::npos);
  detach(a);
  EXPECT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
}

TEST_F(TcAttachmentTest, ForeignQdiscAndFiltersSurviveDetach) {
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

TEST_F(TcAttachmentTest, AttachingAgainReplacesOurFilterInPlace) {
  attach().release();
  auto again = attach();
  const std::string filters = tc("filter show", "ingress");
  EXPECT_EQ(count(filters, "handle 0x2a"), 1u) << filters;
  {
    NetnsScope in_host(lab_->host_netns());
    EXPECT_TRUE(dp::TcAttachment::is_attached(tap_.tap_ifindex));
  }
  detach(again);
  NetnsScope in_host(lab_->host_netns());
  EXPECT_FALSE(dp::TcAttachment::is_attached(tap_.tap_ifindex));
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

}  // namespace
}  // namespace zn::test
