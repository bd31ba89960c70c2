// A session's cap counts every socket the proxy holds for it (issue 32):
// its guest connections and the upstream sockets opened for them. Guest
// 127.0.0.1 (session s1) with a cap of 5 sockets: two relayed connections
// hold four; a third is accepted (the fifth) but its upstream is refused
// (without the upstream sockets counted it would be relayed), and so is a
// fourth. The control: session s2's connection, on the same proxy at the
// same time, is relayed. Root: IP_TRANSPARENT
// listener; the upstream is a loopback listener that never accepts (its
// backlog completes the connects).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "userspace/net/transparent_socket.h"
#include "userspace/proxy/listener_fixture.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

class PassthroughToLoopback : public test::ConnectionPolicy {
 public:
  explicit PassthroughToLoopback(uint16_t upstream_port) : port_(upstream_port) {}
  std::string tenant_of(const sockaddr_storage& guest) const override {
    return net::endpoint_text(guest).rfind("127.0.0.2:", 0) == 0 ? "s2" : "s1";
  }
  UpstreamDecision decide(const ConnectionFacts& facts) override {
    UpstreamDecision d;
    d.mode = ConnectionMode::kPassthrough;
    d.session = tenant_of(facts.guest);
    d.host = "upstream.test";
    d.addresses = {*net::IpAddress::parse("127.0.0.1")};
    d.port = port_;
    return d;
  }

 private:
  uint16_t port_;
};

using test::connect_from;

bool becomes(const std::function<bool()>& condition) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);  // polling a counter, not waiting for time to pass
  }
  return true;
}

TEST(SessionCap, UpstreamSocketsCountAgainstTheSessionsCap) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  // The upstream: a listener whose backlog holds every connect.
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(upstream, reinterpret_cast<sockaddr*>(&at), sizeof(at)), 0);
  ASSERT_EQ(::listen(upstream, 64), 0);
  socklen_t len = sizeof(at);
  ::getsockname(upstream, reinterpret_cast<sockaddr*>(&at), &len);

  PassthroughToLoopback policy(ntohs(at.sin_port));
  ProxyConfig config;
  config.addresses = {"127.0.0.1"};
  config.port = 0;
  config.max_connections_per_guest = 5;
  GuardConfig allow_loopback;
  allow_loopback.allow = {*net::AddressPrefix::parse("127.0.0.0/8")};
  config.guard = std::make_shared<DestinationGuard>(allow_loopback);
  std::vector<int> fds;
  {
    TransparentProxy proxy(config, policy);
    auto counters = [&] { return proxy.counters(); };
    for (int i = 0; i < 2; ++i) fds.push_back(connect_from(proxy.port(), "127.0.0.1"));
    ASSERT_TRUE(becomes([&] { return counters().allowed == 2; })) << counters().allowed;
    // The fifth socket: the guest connection is accepted, its upstream is not.
    fds.push_back(connect_from(proxy.port(), "127.0.0.1"));
    ASSERT_TRUE(becomes([&] { return counters().rejected_guest_cap == 1; }));
    EXPECT_EQ(counters().allowed, 2u);
    // Its slot is given back when it is reset: the next is accepted and
    // refused the same way, never relayed.
    fds.push_back(connect_from(proxy.port(), "127.0.0.1"));
    ASSERT_TRUE(becomes([&] { return counters().rejected_guest_cap == 2; }));
    EXPECT_EQ(counters().allowed, 2u);
    // The control: another session is relayed meanwhile.
    fds.push_back(connect_from(proxy.port(), "127.0.0.2"));
    EXPECT_TRUE(becomes([&] { return counters().allowed == 3; })) << counters().allowed;
    for (int fd : fds) ::close(fd);
  }
  ::close(upstream);
}

}  // namespace
}  // namespace zn::proxy
