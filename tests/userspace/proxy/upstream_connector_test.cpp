// The upstream connector shared by passthrough and interception, against real
// sockets on loopback: the guard is asked about every address before it is
// connected, an address that fails (refused port, failed handshake) moves on
// to the next, and "every address refused by the guard" is told apart from
// "tried and unreachable". No root.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "userspace/net/address.h"
#include "userspace/net/prefix.h"
#include "userspace/proxy/destination_guard.h"
#include "userspace/proxy/upstream_connector.h"

namespace zn::proxy {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

net::IpAddress ip(const char* text) { return *net::IpAddress::parse(text); }

class UpstreamConnectorTest : public ::testing::Test {
 protected:
  // 127.0.0.1 listens; 127.0.0.2 has nothing on the port (connection refused).
  UpstreamConnectorTest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    acceptor_.listen();
  }

  // Loopback is a local address: allowed here only as zerod's upstream_allow would.
  static DestinationGuard guard_allowing(std::vector<const char*> prefixes) {
    GuardConfig g;
    for (const char* p : prefixes) g.allow.push_back(*net::AddressPrefix::parse(p));
    return DestinationGuard(g);
  }

  UpstreamConnection run(const std::vector<net::IpAddress>& addresses, const DestinationGuard* guard,
                         const UpstreamHandshake& handshake = {}) {
    std::optional<UpstreamConnection> out;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          out = co_await connect_upstream(addresses, port_, guard, 2s, handshake);
        },
        asio::detached);
    io_.run_for(5s);
    io_.restart();
    EXPECT_TRUE(out.has_value()) << "connect_upstream did not finish";
    return out ? std::move(*out) : UpstreamConnection{};
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
};

TEST_F(UpstreamConnectorTest, TheGuardRefusingEveryAddressIsNotAnAttempt) {
  const DestinationGuard guard = guard_allowing({});  // loopback is not a public address
  UpstreamConnection c = run({ip("127.0.0.1"), ip("::1")}, &guard);
  EXPECT_EQ(c.socket, nullptr);
  EXPECT_FALSE(c.attempted);
  EXPECT_FALSE(c.refused.empty());
}

TEST_F(UpstreamConnectorTest, NoGuardRefusesEverything) {
  UpstreamConnection c = run({ip("127.0.0.1")}, nullptr);
  EXPECT_EQ(c.socket, nullptr);
  EXPECT_FALSE(c.attempted);
  EXPECT_EQ(c.refused, "no destination guard");
}

TEST_F(UpstreamConnectorTest, AnAllowedAddressConnects) {  // the positive control of the refusals
  const DestinationGuard guard = guard_allowing({"127.0.0.1/32"});
  UpstreamConnection c = run({ip("127.0.0.1")}, &guard);
  ASSERT_NE(c.socket, nullptr);
  EXPECT_TRUE(c.socket->is_open());
  EXPECT_EQ(c.upstream, "127.0.0.1:" + std::to_string(port_));
}

TEST_F(UpstreamConnectorTest, ARefusedAddressIsSkippedAndTheNextConnects) {
  // ::1 is not allowed: the guard skips it without a connect.
  const DestinationGuard guard = guard_allowing({"127.0.0.1/32"});
  UpstreamConnection c = run({ip("::1"), ip("127.0.0.1")}, &guard);
  ASSERT_NE(c.socket, nullptr);
  EXPECT_EQ(c.upstream, "127.0.0.1:" + std::to_string(port_));
}

TEST_F(UpstreamConnectorTest, AnUnreachableAddressFallsThroughToTheNext) {
  const DestinationGuard guard = guard_allowing({"127.0.0.0/8"});
  UpstreamConnection c = run({ip("127.0.0.2"), ip("127.0.0.1")}, &guard);
  ASSERT_NE(c.socket, nullptr);
  EXPECT_EQ(c.upstream, "127.0.0.1:" + std::to_string(port_));
}

TEST_F(UpstreamConnectorTest, OnlyUnreachableAddressesAreAnAttemptThatFailed) {
  const DestinationGuard guard = guard_allowing({"127.0.0.0/8"});
  UpstreamConnection c = run({ip("127.0.0.2"), ip("127.0.0.3")}, &guard);
  EXPECT_EQ(c.socket, nullptr);
  EXPECT_TRUE(c.attempted);
  EXPECT_FALSE(c.last_error.empty());
}

TEST_F(UpstreamConnectorTest, AFailedHandshakeMovesOnToTheNextAddress) {
  const DestinationGuard guard = guard_allowing({"127.0.0.1/32"});
  std::vector<std::string> seen;
  UpstreamHandshake handshake =
      [&](tcp::socket& s, const std::string& upstream) -> asio::awaitable<std::optional<std::string>> {
    seen.push_back(upstream);
    EXPECT_TRUE(s.is_open());
    if (seen.size() == 1) co_return std::string("certificate verify failed");
    co_return std::nullopt;
  };
  // The same address twice: the second attempt is a new connection, and the
  // one that passes its handshake is the one handed back.
  UpstreamConnection c = run({ip("127.0.0.1"), ip("127.0.0.1")}, &guard, handshake);
  ASSERT_NE(c.socket, nullptr);
  EXPECT_EQ(seen.size(), 2u);
}

TEST_F(UpstreamConnectorTest, AHandshakeFailingEverywhereReportsItsReason) {
  const DestinationGuard guard = guard_allowing({"127.0.0.1/32"});
  UpstreamHandshake handshake = [](tcp::socket&,
                                   const std::string&) -> asio::awaitable<std::optional<std::string>> {
    co_return std::string("certificate verify failed");
  };
  UpstreamConnection c = run({ip("127.0.0.1")}, &guard, handshake);
  EXPECT_EQ(c.socket, nullptr);
  EXPECT_TRUE(c.attempted);
  EXPECT_EQ(c.last_error, "certificate verify failed");
}

}  // namespace
}  // namespace zn::proxy
