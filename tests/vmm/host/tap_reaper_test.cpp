// The TAP reaper: queued TAPs deleted in batches on its worker (one device
// group deleted per batch), others in the namespace left alone. Root.
#include "vmm/host/tap_reaper.h"

#include <gtest/gtest.h>
#include <net/if.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "common/netns.h"
#include "support/test_names.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/tap_device.h"

namespace zn::vmm {
namespace {

using testing::TestNetns;

TEST(TapReaper, DeletesEveryQueuedTapInBatchesAndNothingElse) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("reap");
  NetnsScope in_ns(ns.name());
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) {
    names.push_back("zr" + std::to_string(i));
    create_tap(names.back(), {std::nullopt, 1500, {"10.77." + std::to_string(i) + ".1/30"}});
  }
  create_tap("keep0");
  std::mutex mu;
  std::condition_variable cv;
  bool held = true;
  std::vector<std::string> gone, failed;
  size_t batches = 0;
  {
    TapReaper reaper(
        [&](const std::vector<std::string>& g, const std::vector<std::string>& f) {
          std::lock_guard lock(mu);
          gone.insert(gone.end(), g.begin(), g.end());
          failed.insert(failed.end(), f.begin(), f.end());
        },
        [&](const std::vector<std::string>&) {
          std::unique_lock lock(mu);
          ++batches;
          cv.notify_all();
          cv.wait(lock, [&] { return !held; });
        });
    // The first name starts a batch the hook holds; the rest queue behind it
    // and go as one more batch.
    reaper.reap(names[0]);
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return batches == 1; });
    }
    for (size_t i = 1; i < names.size(); ++i) reaper.reap(names[i]);
    reaper.reap("zr-never-was");  // already gone: reported gone, not failed
    EXPECT_EQ(reaper.pending(), names.size() + 1);
    EXPECT_NE(if_nametoindex("zr0"), 0u);  // queued is not deleted
    {
      std::lock_guard lock(mu);
      held = false;
    }
    cv.notify_all();
    reaper.drain();
    std::lock_guard lock(mu);
    EXPECT_EQ(reaper.pending(), 0u);
  }
  EXPECT_EQ(batches, 2u);
  EXPECT_TRUE(failed.empty());
  EXPECT_EQ(gone.size(), names.size() + 1);
  for (const auto& n : names) EXPECT_EQ(if_nametoindex(n.c_str()), 0u) << n;
  EXPECT_NE(if_nametoindex("keep0"), 0u);  // not queued, not in the group: kept
}

TEST(TapReaper, TheDestructorReapsWhatIsQueued) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("reapd");
  NetnsScope in_ns(ns.name());
  create_tap("zd0");
  create_tap("zd1");
  {
    TapReaper reaper({});
    reaper.reap("zd0");
    reaper.reap("zd1");
  }
  EXPECT_EQ(if_nametoindex("zd0"), 0u);
  EXPECT_EQ(if_nametoindex("zd1"), 0u);
}

TEST(RouteNetlink, DeletesALinkGroupInOneRequest) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("lgrp");
  NetnsScope in_ns(ns.name());
  RouteNetlink nl;
  const int a = create_tap("zg0"), b = create_tap("zg1");
  create_tap("zg2");
  EXPECT_TRUE(nl.set_link_group(a, 4242));
  EXPECT_TRUE(nl.set_link_group(b, 4242));
  EXPECT_FALSE(nl.set_link_group(999999, 4242));
  nl.delete_link_group(4242);
  EXPECT_FALSE(nl.find_link("zg0"));
  EXPECT_FALSE(nl.find_link("zg1"));
  EXPECT_TRUE(nl.find_link("zg2"));
  nl.delete_link_group(4242);  // an empty group is no error
}

}  // namespace
}  // namespace zn::vmm
