// The proxy's workers are shared fairly between guests (issue 32): a guest
// whose every connection's decision blocks (a name that takes seconds to
// resolve) holds only its share of them, and another guest's connection is
// decided at once. The control: with a share as large as the pool, the same
// guest holds every worker and the other waits. Root: IP_TRANSPARENT
// listener; two guest addresses on loopback.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "userspace/net/transparent_socket.h"
#include "userspace/proxy/listener_fixture.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

// 127.0.0.1's decisions wait until released; 127.0.0.2's are counted and
// reset at once (on a worker, or with `quiet_at_once` on the loop itself).
class BlockingDecisions : public test::ConnectionPolicy {
 public:
  explicit BlockingDecisions(bool quiet_at_once)
      : quiet_at_once_(quiet_at_once), released_(release_.get_future().share()) {}
  std::optional<UpstreamDecision> decide_at_once(const ConnectionFacts& facts) override {
    if (!quiet_at_once_ || net::endpoint_text(facts.guest).rfind("127.0.0.2:", 0) != 0) return std::nullopt;
    ++quiet_decided;
    return UpstreamDecision{};  // kReset
  }
  UpstreamDecision decide(const ConnectionFacts& facts) override {
    if (net::endpoint_text(facts.guest).rfind("127.0.0.1:", 0) == 0) {
      ++blocked;
      released_.wait();
    } else {
      ++quiet_decided;
    }
    return {};  // kReset
  }
  void release() { release_.set_value(); }

  std::atomic<int> blocked{0}, quiet_decided{0};

 private:
  const bool quiet_at_once_;
  std::promise<void> release_;
  std::shared_future<void> released_;
};

using test::connect_from;

// Guest 127.0.0.1 opens 12 connections whose decisions block; then guest
// 127.0.0.2 opens one. Whether its decision was made while the others
// still blocked.
bool quiet_guest_decided_while_noisy_blocks(FairLimits workers, bool quiet_at_once = false) {
  BlockingDecisions policy(quiet_at_once);
  ProxyConfig config;
  config.addresses = {"127.0.0.1"};
  config.port = 0;
  config.workers = workers;
  std::vector<int> fds;
  bool decided = false;
  {
    TransparentProxy proxy(config, policy);
    for (int i = 0; i < 12; ++i) fds.push_back(connect_from(proxy.port(), "127.0.0.1"));
    // The noisy guest holds every worker its share allows.
    const int share = static_cast<int>(std::min(workers.slots, workers.per_tenant));
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (policy.blocked < share && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(5ms);
    EXPECT_EQ(policy.blocked, share);
    fds.push_back(connect_from(proxy.port(), "127.0.0.2"));
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (policy.quiet_decided == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(5ms);
    decided = policy.quiet_decided > 0;
    policy.release();
  }
  for (int fd : fds) ::close(fd);
  return decided;
}

TEST(ProxyWorkerShare, AGuestWhoseDecisionsBlockHoldsOnlyItsShare) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  EXPECT_TRUE(
      quiet_guest_decided_while_noisy_blocks({.slots = 4, .per_tenant = 2, .per_lane = 0, .queued = 64}));
  // Control: a share as large as the pool.
  EXPECT_FALSE(
      quiet_guest_decided_while_noisy_blocks({.slots = 4, .per_tenant = 4, .per_lane = 0, .queued = 64}));
}

// A decision the policy makes at once (no name to resolve) is made on the
// loop: it waits for no worker, even with every worker held by a guest
// whose decisions block (the control above: the same guest, the same share,
// the quiet guest's decision left to a worker waits).
TEST(ProxyWorkerShare, ADecisionMadeAtOnceWaitsForNoWorker) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  EXPECT_TRUE(
      quiet_guest_decided_while_noisy_blocks({.slots = 4, .per_tenant = 4, .per_lane = 0, .queued = 64},
                                             /*quiet_at_once=*/true));
}

}  // namespace
}  // namespace zn::proxy
