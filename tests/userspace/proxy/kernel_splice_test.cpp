// The kernel-side passthrough relay (kernel_splice.h) on real TCP sockets over
// loopback: a "guest" client connected to the proxy's guest socket, the
// proxy's upstream socket connected to a "server". The relay runs on its own
// loop thread; the test drives both ends with blocking calls. Root: loading
// the program and inserting into a sockhash need CAP_BPF/CAP_NET_ADMIN.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <bpf/bpf.h>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "userspace/net/unique_fd.h"
#include "userspace/proxy/kernel_splice.h"
#include "zn_splice.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;
using tcp = asio::ip::tcp;
using net::UniqueFd;

constexpr int kWaitMs = 10000;  // a bound for "it never came", not a pace

// A connected loopback pair: {the client's end, the accepted end}.
std::pair<UniqueFd, UniqueFd> tcp_pair() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  UniqueFd client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  UniqueFd accepted(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_GE(accepted.get(), 0);
  return {std::move(client), std::move(accepted)};
}

// Readable (or at EOF/error) within the bound.
bool readable(int fd, int ms = kWaitMs) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

// Reads until EOF; false on an error or a stall past the bound.
bool read_to_eof(int fd, std::string& out) {
  char buf[65536];
  for (;;) {
    if (!readable(fd)) return false;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return false;
    if (n == 0) return true;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Reads exactly n bytes; false on EOF, an error or a stall.
bool read_exactly(int fd, size_t n, std::string& out) {
  char buf[65536];
  while (n > 0) {
    if (!readable(fd)) return false;
    ssize_t r = ::recv(fd, buf, std::min(n, sizeof(buf)), 0);
    if (r <= 0) return false;
    out.append(buf, static_cast<size_t>(r));
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// One relayed pair: guest_end -> [guest | relay | upstream] -> server_end.
struct Relay {
  asio::io_context io;
  tcp::socket guest{io}, upstream{io};
  UniqueFd guest_end, server_end;
  std::future<KernelRelayResult> result;
  std::thread loop;

  Relay() {
    auto [g_client, g_accepted] = tcp_pair();
    auto [u_client, u_accepted] = tcp_pair();
    guest_end = std::move(g_client);
    guest.assign(tcp::v4(), g_accepted.release());
    upstream.assign(tcp::v4(), u_client.release());
    server_end = std::move(u_accepted);
  }
  void start(KernelSplice& ks, std::chrono::milliseconds idle = 60s) {
    result = asio::co_spawn(io, ks.relay(guest, upstream, idle), asio::use_future);
    loop = std::thread([this] { io.run(); });
  }
  // The relay's outcome, within the bound.
  std::optional<KernelRelayResult> finish() {
    if (result.wait_for(std::chrono::milliseconds(kWaitMs)) != std::future_status::ready) return std::nullopt;
    return result.get();
  }
  ~Relay() {
    io.stop();
    if (loop.joinable()) loop.join();
  }
};

class KernelSpliceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ks.available()) << ks.unavailable_reason(); }
  void TearDown() override { EXPECT_EQ(ks.entries(), 0u); }
  KernelSplice ks{64};
};

TEST_F(KernelSpliceTest, SmallExchangeBothWaysAndCountsExact) {
  Relay r;
  r.start(ks);
  ASSERT_TRUE(write_all(r.guest_end.get(), "hello upstream"));
  std::string got;
  ASSERT_TRUE(read_exactly(r.server_end.get(), 14, got));
  EXPECT_EQ(got, "hello upstream");
  ASSERT_TRUE(write_all(r.server_end.get(), "hi guest"));
  got.clear();
  ASSERT_TRUE(read_exactly(r.guest_end.get(), 8, got));
  EXPECT_EQ(got, "hi guest");
  ::shutdown(r.guest_end.get(), SHUT_WR);
  ::shutdown(r.server_end.get(), SHUT_WR);
  got.clear();
  EXPECT_TRUE(read_to_eof(r.server_end.get(), got));
  EXPECT_TRUE(read_to_eof(r.guest_end.get(), got));
  EXPECT_TRUE(got.empty());
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->relayed);
  EXPECT_FALSE(res->idle_closed);
  EXPECT_EQ(res->from_guest, 14u);
  EXPECT_EQ(res->to_guest, 8u);
}

// Several MiB each way at once, each side closing when done: every byte
// arrives once, in order, and the counts are exact.
TEST_F(KernelSpliceTest, MebibytesBothWaysChecksummed) {
  Relay r;
  r.start(ks);
  const std::string up = random_bytes(6 << 20, 1), down = random_bytes(5 << 20, 2);
  std::string at_server, at_guest;
  bool server_ok = false, guest_ok = false;
  std::thread w1([&] {
    write_all(r.guest_end.get(), up);
    ::shutdown(r.guest_end.get(), SHUT_WR);
  });
  std::thread w2([&] {
    write_all(r.server_end.get(), down);
    ::shutdown(r.server_end.get(), SHUT_WR);
  });
  std::thread r1([&] { server_ok = read_to_eof(r.server_end.get(), at_server); });
  guest_ok = read_to_eof(r.guest_end.get(), at_guest);
  w1.join();
  w2.join();
  r1.join();
  EXPECT_TRUE(server_ok);
  EXPECT_TRUE(guest_ok);
  EXPECT_EQ(at_server.size(), up.size());
  EXPECT_EQ(fnv1a(at_server), fnv1a(up));
  EXPECT_EQ(at_guest.size(), down.size());
  EXPECT_EQ(fnv1a(at_guest), fnv1a(down));
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->from_guest, up.size());
  EXPECT_EQ(res->to_guest, down.size());
}

// A FIN right behind MiBs still in the redirect backlog: the far end must
// get every byte before its EOF, and the other direction stays open.
void half_close_with_data_in_flight(bool guest_first) {
  KernelSplice ks{8};
  ASSERT_TRUE(ks.available()) << ks.unavailable_reason();
  Relay r;
  r.start(ks);
  const int closer = guest_first ? r.guest_end.get() : r.server_end.get();
  const int far = guest_first ? r.server_end.get() : r.guest_end.get();
  const std::string data = random_bytes(4 << 20, 3);
  std::thread writer([&] {
    write_all(closer, data);
    ::shutdown(closer, SHUT_WR);
  });
  std::string got;
  EXPECT_TRUE(read_to_eof(far, got));
  writer.join();
  EXPECT_EQ(got.size(), data.size());
  EXPECT_EQ(fnv1a(got), fnv1a(data));
  // Half-closed, not closed: the far end still talks back.
  ASSERT_TRUE(write_all(far, "still here"));
  std::string back;
  ASSERT_TRUE(read_exactly(closer, 10, back));
  EXPECT_EQ(back, "still here");
  ::shutdown(far, SHUT_WR);
  back.clear();
  EXPECT_TRUE(read_to_eof(closer, back));
  EXPECT_TRUE(back.empty());
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_EQ(guest_first ? res->from_guest : res->to_guest, data.size());
  EXPECT_EQ(guest_first ? res->to_guest : res->from_guest, 10u);
  EXPECT_EQ(ks.entries(), 0u);
}

TEST_F(KernelSpliceTest, GuestHalfCloseWaitsForBytesInFlight) { half_close_with_data_in_flight(true); }
TEST_F(KernelSpliceTest, UpstreamHalfCloseWaitsForBytesInFlight) { half_close_with_data_in_flight(false); }

// Bytes that arrived before the pair was inserted, and none after: the
// verdict only runs on new data, so without the SO_RCVLOWAT nudge they would
// sit in the receive queues forever. The proxy peeked at the guest's first
// bytes (the ClientHello), as it does: they go on too, once.
TEST_F(KernelSpliceTest, DataQueuedBeforeInsertionIsRelayed) {
  Relay r;
  const std::string from_guest = random_bytes(100000, 4), from_server = random_bytes(50000, 5);
  ASSERT_TRUE(write_all(r.guest_end.get(), from_guest));
  ASSERT_TRUE(write_all(r.server_end.get(), from_server));
  // All of it queued at the proxy's sockets before the relay starts.
  auto queued = [](tcp::socket& s) {
    int n = 0;
    ::ioctl(s.native_handle(), FIONREAD, &n);
    return static_cast<size_t>(n);
  };
  for (int i = 0;
       i < kWaitMs && (queued(r.guest) < from_guest.size() || queued(r.upstream) < from_server.size()); ++i)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(queued(r.guest), from_guest.size());
  ASSERT_EQ(queued(r.upstream), from_server.size());
  char hello[1000];
  ASSERT_EQ(::recv(r.guest.native_handle(), hello, sizeof(hello), MSG_PEEK), 1000);
  r.start(ks);
  std::string at_server, at_guest;
  ASSERT_TRUE(read_exactly(r.server_end.get(), from_guest.size(), at_server));
  ASSERT_TRUE(read_exactly(r.guest_end.get(), from_server.size(), at_guest));
  EXPECT_TRUE(at_server == from_guest);
  EXPECT_TRUE(at_guest == from_server);
  ::shutdown(r.guest_end.get(), SHUT_WR);
  ::shutdown(r.server_end.get(), SHUT_WR);
  std::string rest;
  EXPECT_TRUE(read_to_eof(r.server_end.get(), rest));
  EXPECT_TRUE(read_to_eof(r.guest_end.get(), rest));
  EXPECT_EQ(rest.size(), 0u);
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_EQ(res->from_guest, from_guest.size());
  EXPECT_EQ(res->to_guest, from_server.size());
}

// The upstream sent its data and its FIN before the insertion: a sockhash
// takes only established sockets, so the relay refuses the pair and has
// changed nothing: every byte and the FIN are still there for the caller's
// splice(2) relay, and the maps are empty.
TEST_F(KernelSpliceTest, AFinBeforeInsertionLeavesThePairToTheCaller) {
  Relay r;
  const std::string data = random_bytes(30000, 6);
  ASSERT_TRUE(write_all(r.server_end.get(), data));
  ::shutdown(r.server_end.get(), SHUT_WR);
  for (int i = 0; i < kWaitMs; ++i) {
    pollfd p{r.upstream.native_handle(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 1) break;
    std::this_thread::sleep_for(1ms);
  }
  r.start(ks);
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->relayed);
  EXPECT_EQ(ks.entries(), 0u);
  std::string got;
  EXPECT_TRUE(read_to_eof(r.upstream.native_handle(), got));
  EXPECT_TRUE(got == data);
}

// Quiet for the idle timeout: both ends are reset (no FIN first), and the
// relay says why. The positive control: traffic spaced under the timeout
// keeps it open well past it.
TEST_F(KernelSpliceTest, IdleTimeoutResetsBothEnds) {
  Relay r;
  r.start(ks, 400ms);
  std::string got;
  for (int i = 0; i < 8; ++i) {  // 1.2 s of traffic, 150 ms apart
    ASSERT_TRUE(write_all(r.guest_end.get(), "x"));
    ASSERT_TRUE(read_exactly(r.server_end.get(), 1, got));
    std::this_thread::sleep_for(150ms);
  }
  ASSERT_EQ(r.result.wait_for(0s), std::future_status::timeout) << "closed while active";
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_TRUE(res->idle_closed);
  EXPECT_EQ(res->from_guest, 8u);
  char c;
  for (int fd : {r.guest_end.get(), r.server_end.get()}) {
    ASSERT_TRUE(readable(fd));
    errno = 0;
    EXPECT_EQ(::recv(fd, &c, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET);
  }
}

// A reset on one side tears the other down too.
TEST_F(KernelSpliceTest, ResetOnOneSideEndsBoth) {
  Relay r;
  r.start(ks);
  ASSERT_TRUE(write_all(r.guest_end.get(), "abc"));
  std::string got;
  ASSERT_TRUE(read_exactly(r.server_end.get(), 3, got));
  linger abort{1, 0};
  ::setsockopt(r.guest_end.get(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
  r.guest_end.reset();
  auto res = r.finish();
  ASSERT_TRUE(res);
  EXPECT_FALSE(res->idle_closed);
  EXPECT_TRUE(read_to_eof(r.server_end.get(), got));  // the upstream was shut down
}

// Many relays one after another: every entry goes when its relay ends, so
// the maps (sized for 64 pairs here) never fill up.
TEST_F(KernelSpliceTest, ThousandSequentialRelaysLeaveTheMapsEmpty) {
  for (int i = 0; i < 1000; ++i) {
    Relay r;
    r.start(ks);
    ASSERT_TRUE(write_all(r.guest_end.get(), "ping"));
    std::string got;
    ASSERT_TRUE(read_exactly(r.server_end.get(), 4, got));
    ::shutdown(r.guest_end.get(), SHUT_WR);
    ::shutdown(r.server_end.get(), SHUT_WR);
    ASSERT_TRUE(read_to_eof(r.guest_end.get(), got));
    auto res = r.finish();
    ASSERT_TRUE(res);
    ASSERT_TRUE(res->relayed) << "relay " << i;
    ASSERT_EQ(res->from_guest, 4u);
  }
  EXPECT_EQ(ks.entries(), 0u);
}

// A socket under the verdict with no side entry, or whose peer is not a
// redirect target: its bytes go to its own reader and to nobody else (a
// failed redirect would drop them; a stale peer would leak them).
TEST_F(KernelSpliceTest, SocketWithoutPeerPassesNothingToAnyoneElse) {
  for (bool with_side : {false, true}) {
    auto [client, accepted] = tcp_pair();
    auto [bystander_client, bystander] = tcp_pair();  // a would-be peer, not a target
    uint64_t cookie = 0, bystander_cookie = 0;
    socklen_t len = sizeof(cookie);
    ASSERT_EQ(::getsockopt(accepted.get(), SOL_SOCKET, SO_COOKIE, &cookie, &len), 0);
    ASSERT_EQ(::getsockopt(bystander.get(), SOL_SOCKET, SO_COOKIE, &bystander_cookie, &len), 0);
    if (with_side) {
      zn_splice_side side{bystander_cookie, 0, 0};
      ASSERT_EQ(bpf_map_update_elem(ks.sides_map_fd(), &cookie, &side, BPF_NOEXIST), 0);
    }
    const uint64_t fd = static_cast<uint64_t>(accepted.get());
    ASSERT_EQ(bpf_map_update_elem(ks.armed_map_fd(), &cookie, &fd, BPF_NOEXIST), 0);
    ASSERT_TRUE(write_all(client.get(), "secret"));
    std::string got;
    ASSERT_TRUE(read_exactly(accepted.get(), 6, got)) << "with_side " << with_side;
    EXPECT_EQ(got, "secret");
    // Nothing went out of the bystander (its client would read it).
    EXPECT_FALSE(readable(bystander_client.get(), 100));
    zn_splice_side side{};
    if (with_side) {
      ASSERT_EQ(bpf_map_lookup_elem(ks.sides_map_fd(), &cookie, &side), 0);
      EXPECT_EQ(side.bytes, 0u);
      bpf_map_delete_elem(ks.sides_map_fd(), &cookie);
    }
    bpf_map_delete_elem(ks.armed_map_fd(), &cookie);
  }
}

}  // namespace
}  // namespace zn::proxy
