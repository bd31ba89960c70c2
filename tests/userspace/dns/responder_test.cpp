// The responder on real loopback sockets: UDP and TCP, IPv4 and IPv6,
// framing, limits, and clean start/stop. Needs root (IP_TRANSPARENT).
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "support/dns_messages.h"
#include "userspace/dns/responder.h"
#include "userspace/dns/static_resolver.h"
#include "userspace/net/transparent_socket.h"

namespace zn::dns::test {
namespace {

using namespace std::chrono_literals;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// Never answers until released; answers then (or never, to test shutdown).
class StallingResolver : public Resolver {
 public:
  void resolve(const std::string&, QType, Callback cb) override {
    std::lock_guard lock(mutex);
    callbacks.push_back(std::move(cb));
  }
  std::mutex mutex;
  std::vector<Callback> callbacks;
};

class ResponderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT)";
  }
  std::unique_ptr<Responder> start(ResponderConfig config = {}) {
    config.port = 0;
    return std::make_unique<Responder>(config, policy_, resolver_);
  }
  RecordingPolicy policy_;
  StaticResolver resolver_{
      {{"api.allowed.test",
        {*zn::net::IpAddress::parse("198.18.0.10"), *zn::net::IpAddress::parse("2001:db8:18::10")}}}};
};

TEST_F(ResponderTest, UdpIpv4AndIpv6QueriesAreAnswered) {
  auto r = start();
  ASSERT_NE(r->port(), 0);
  auto v4 = udp_exchange(zn::net::make_endpoint("127.0.0.1", r->port()), make_query("api.allowed.test"));
  ASSERT_TRUE(v4);
  EXPECT_EQ(parse_reply(*v4)->addresses, std::vector<std::string>{"198.18.0.10"});
  auto v6 = udp_exchange(zn::net::make_endpoint("::1", r->port()),
                         make_query("api.allowed.test", {.type = LDNS_RR_TYPE_AAAA}));
  ASSERT_TRUE(v6);
  EXPECT_EQ(parse_reply(*v6)->addresses, std::vector<std::string>{"2001:db8:18::10"});
  auto denied = udp_exchange(zn::net::make_endpoint("::1", r->port()), make_query("secret-data.evil.test"));
  ASSERT_TRUE(denied);
  EXPECT_EQ(parse_reply(*denied)->rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(resolver_.calls(), 2u);
  auto c = r->counters();
  EXPECT_EQ(c.queries, 3u);
  EXPECT_EQ(c.allowed, 2u);
  EXPECT_EQ(c.denied, 1u);
}

TEST_F(ResponderTest, GarbageOverUdpIsCountedAndServiceContinues) {
  auto r = start();
  const auto server = zn::net::make_endpoint("127.0.0.1", r->port());
  Bytes q = make_query("api.allowed.test");
  Bytes loop = compression_loop(q);
  auto formerr = udp_exchange(server, loop);
  ASSERT_TRUE(formerr);
  EXPECT_EQ(parse_reply(*formerr)->rcode, LDNS_RCODE_FORMERR);
  EXPECT_FALSE(udp_exchange(server, Bytes{1, 2, 3}, 200ms));     // dropped
  EXPECT_FALSE(udp_exchange(server, Bytes(9000, 0x41), 200ms));  // oversize, dropped
  auto ok = udp_exchange(server, q);
  ASSERT_TRUE(ok);
  EXPECT_EQ(parse_reply(*ok)->rcode, LDNS_RCODE_NOERROR);
  auto c = r->counters();
  EXPECT_EQ(c.malformed, 3u);
  EXPECT_EQ(c.queries, 4u);
}

TEST_F(ResponderTest, TcpAnswersWithShortReadsAndPipelining) {
  auto r = start();
  Fd fd(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  Bytes frame = tcp_frame(make_query("api.allowed.test", {.id = 1}));
  // One byte at a time: the length prefix split, the body split.
  for (uint8_t b : frame) {
    ASSERT_TRUE(send_all(fd.get(), &b, 1));
    std::this_thread::sleep_for(2ms);
  }
  auto m1 = tcp_read_message(fd.get(), 2s);
  ASSERT_TRUE(m1);
  EXPECT_EQ(parse_reply(*m1)->id, 1);
  EXPECT_EQ(parse_reply(*m1)->addresses, std::vector<std::string>{"198.18.0.10"});
  // Two queries in one write.
  Bytes both = tcp_frame(make_query("api.allowed.test", {.type = LDNS_RR_TYPE_AAAA, .id = 2}));
  Bytes second = tcp_frame(make_query("evil.test", {.id = 3}));
  both.insert(both.end(), second.begin(), second.end());
  ASSERT_TRUE(send_all(fd.get(), both.data(), both.size()));
  auto m2 = tcp_read_message(fd.get(), 2s);
  auto m3 = tcp_read_message(fd.get(), 2s);
  ASSERT_TRUE(m2 && m3);
  EXPECT_EQ(parse_reply(*m2)->addresses, std::vector<std::string>{"2001:db8:18::10"});
  EXPECT_EQ(parse_reply(*m3)->id, 3);
  EXPECT_EQ(parse_reply(*m3)->rcode, LDNS_RCODE_NXDOMAIN);
}

TEST_F(ResponderTest, TcpOverIpv6Works) {
  auto r = start();
  Fd fd(tcp_connect(zn::net::make_endpoint("::1", r->port())));
  Bytes frame = tcp_frame(make_query("api.allowed.test"));
  ASSERT_TRUE(send_all(fd.get(), frame.data(), frame.size()));
  auto m = tcp_read_message(fd.get(), 2s);
  ASSERT_TRUE(m);
  EXPECT_EQ(parse_reply(*m)->addresses, std::vector<std::string>{"198.18.0.10"});
}

TEST_F(ResponderTest, TcpOversizeLengthClosesConnection) {
  auto r = start();
  Fd fd(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  const uint8_t huge[2] = {0xff, 0xff};
  ASSERT_TRUE(send_all(fd.get(), huge, 2));
  EXPECT_TRUE(wait_closed(fd.get(), 2s));
  EXPECT_EQ(r->counters().malformed, 1u);
  EXPECT_EQ(resolver_.calls(), 0u);
}

TEST_F(ResponderTest, TcpIdleAndSlowConnectionsTimeOut) {
  auto r = start({.tcp_idle_timeout = 300ms});
  Fd idle(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  Fd partial(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  Bytes frame = tcp_frame(make_query("api.allowed.test"));
  ASSERT_TRUE(send_all(partial.get(), frame.data(), frame.size() / 2));  // never finishes
  EXPECT_TRUE(wait_closed(idle.get(), 2s));
  EXPECT_TRUE(wait_closed(partial.get(), 2s));
  for (int i = 0; i < 50 && r->tcp_connections() != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(r->tcp_connections(), 0u);
}

TEST_F(ResponderTest, TcpConnectionCapRejectsExtraConnections) {
  auto r = start({.max_tcp_connections = 2});
  Fd a(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  Fd b(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  for (int i = 0; i < 100 && r->tcp_connections() < 2; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(r->tcp_connections(), 2u);
  Fd c(tcp_connect(zn::net::make_endpoint("127.0.0.1", r->port())));
  EXPECT_TRUE(wait_closed(c.get(), 2s));
  EXPECT_EQ(r->counters().tcp_rejected, 1u);
  // The first connections still work.
  Bytes frame = tcp_frame(make_query("api.allowed.test"));
  ASSERT_TRUE(send_all(a.get(), frame.data(), frame.size()));
  EXPECT_TRUE(tcp_read_message(a.get(), 2s));
}

// One session holding its TCP connections open takes only its share of the
// listener's: another session still connects and is answered.
TEST_F(ResponderTest, TcpConnectionsAreCappedPerSession) {
  policy_.sessions = {{"127.0.0.1", "greedy"}, {"127.0.0.2", "quiet"}};
  auto r = start({.max_tcp_connections = 8, .max_tcp_per_session = 3});
  const sockaddr_storage server = zn::net::make_endpoint("127.0.0.1", r->port());
  std::vector<std::unique_ptr<Fd>> greedy;
  for (int i = 0; i < 3; ++i) greedy.push_back(std::make_unique<Fd>(tcp_connect(server, "127.0.0.1")));
  for (int i = 0; i < 100 && r->tcp_connections() < 3; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(r->tcp_connections(), 3u);
  // Past its share: accepted and closed, counted.
  Fd fourth(tcp_connect(server, "127.0.0.1"));
  EXPECT_TRUE(wait_closed(fourth.get(), 2s));
  EXPECT_EQ(r->counters().tcp_rejected, 1u);
  // The other session is answered over TCP (the positive control), and so
  // is the greedy one on the connections it holds.
  Bytes frame = tcp_frame(make_query("api.allowed.test"));
  Fd quiet(tcp_connect(server, "127.0.0.2"));
  ASSERT_TRUE(send_all(quiet.get(), frame.data(), frame.size()));
  EXPECT_TRUE(tcp_read_message(quiet.get(), 2s));
  ASSERT_TRUE(send_all(greedy[0]->get(), frame.data(), frame.size()));
  EXPECT_TRUE(tcp_read_message(greedy[0]->get(), 2s));
  // A connection that ends gives its place back.
  greedy.pop_back();
  for (int i = 0; i < 100 && r->tcp_connections() > 3; ++i) std::this_thread::sleep_for(10ms);
  Fd again(tcp_connect(server, "127.0.0.1"));
  ASSERT_TRUE(send_all(again.get(), frame.data(), frame.size()));
  EXPECT_TRUE(tcp_read_message(again.get(), 2s));
  EXPECT_EQ(r->counters().tcp_rejected, 1u);
}

TEST_F(ResponderTest, UnknownSourceIsRefused) {
  policy_.sessions = {{"198.19.0.2", "g0"}};
  auto r = start();
  auto reply = udp_exchange(zn::net::make_endpoint("127.0.0.1", r->port()), make_query("api.allowed.test"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(parse_reply(*reply)->rcode, LDNS_RCODE_REFUSED);
  EXPECT_EQ(r->counters().refused, 1u);
}

TEST_F(ResponderTest, StopsCleanlyWithQueriesInFlight) {
  StallingResolver stalling;
  auto r = std::make_unique<Responder>(ResponderConfig{.port = 0}, policy_, stalling);
  const uint16_t port = r->port();
  Fd tcp(tcp_connect(zn::net::make_endpoint("127.0.0.1", port)));
  Bytes frame = tcp_frame(make_query("api.allowed.test"));
  ASSERT_TRUE(send_all(tcp.get(), frame.data(), frame.size()));
  EXPECT_FALSE(
      udp_exchange(zn::net::make_endpoint("127.0.0.1", port), make_query("api.allowed.test"), 200ms));
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard lock(stalling.mutex);
      if (stalling.callbacks.size() == 2) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  r.reset();  // joins with one TCP and one UDP query waiting on the resolver
  // The resolver answers after the responder is gone: dropped, no crash.
  for (auto& cb : stalling.callbacks)
    cb(ResolveResult{Rcode::NoError, {*zn::net::IpAddress::parse("198.18.0.10")}, 5});
  EXPECT_TRUE(wait_closed(tcp.get(), 2s));
  // The port is free again: a new responder binds it.
  Responder again(ResponderConfig{.port = port}, policy_, resolver_);
  EXPECT_EQ(again.port(), port);
}

TEST_F(ResponderTest, BindFailureThrows) {
  EXPECT_THROW(Responder(ResponderConfig{.addresses = {"192.0.2.300"}}, policy_, resolver_),
               std::invalid_argument);
}

}  // namespace
}  // namespace zn::dns::test
