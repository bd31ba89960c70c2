#include "userspace/proxy/kernel_splice.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <optional>
#include <spdlog/spdlog.h>

#include "splice.skel.h"
#include "zn_splice.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

// While a FIN waits for the bytes before it to leave, the peer's send count is
// polled (the kernel signals nothing when its redirect backlog drains): from
// this, doubling to the cap, and reset whenever a direction ends.
constexpr std::chrono::microseconds kDrainPollMin{250};
constexpr std::chrono::microseconds kDrainPollMax{50000};

// struct tcp_info as the kernel fills it, past the fields glibc's
// <netinet/tcp.h> declares (<linux/tcp.h> clashes with it).
struct TcpInfo {
  tcp_info base;
  uint64_t pacing_rate;
  uint64_t max_pacing_rate;
  uint64_t bytes_acked;     // since the handshake (the peer's ACKs)
  uint64_t bytes_received;  // in-order sequence space received, the FIN included
};
static_assert(offsetof(TcpInfo, pacing_rate) == 104, "the kernel's tcp_info layout");

std::optional<TcpInfo> tcp_info_of(int fd) {
  TcpInfo info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || len < sizeof(info)) return std::nullopt;
  return info;
}

// Every byte ever written into the socket: acknowledged plus still queued
// (SIOCOUTQ: write_seq - snd_una). Read in that order, a concurrent ACK can
// only make the sum smaller than the truth, never larger.
std::optional<uint64_t> bytes_written(int fd) {
  std::optional<TcpInfo> info = tcp_info_of(fd);
  int queued = 0;
  if (!info || ::ioctl(fd, SIOCOUTQ, &queued) != 0 || queued < 0) return std::nullopt;
  return info->bytes_acked + static_cast<uint64_t>(queued);
}

std::optional<uint64_t> cookie_of(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof(cookie);
  if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0) return std::nullopt;
  return cookie;
}

short poll_now(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return POLLERR;
  return p.revents;
}

size_t count_keys(int map_fd) {
  size_t n = 0;
  uint64_t key = 0, next = 0;
  const void* prev = nullptr;
  while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
    ++n;
    key = next;
    prev = &key;
  }
  return n;
}

std::string libbpf_error(int err) {
  char buf[128];
  libbpf_strerror(err, buf, sizeof(buf));
  return buf;
}

}  // namespace

struct KernelSplice::Impl {
  struct splice* skel = nullptr;  // `struct`: splice(2) shares the name
  std::string reason;
  int targets = -1, armed = -1, sides = -1;

  ~Impl() {
    if (skel) splice__destroy(skel);
  }

  void remove(uint64_t cookie) const {
    // ENOENT is expected: a closed socket has left the sockhashes on its own.
    bpf_map_delete_elem(armed, &cookie);
    bpf_map_delete_elem(targets, &cookie);
    bpf_map_delete_elem(sides, &cookie);
  }
};

KernelSplice::KernelSplice(size_t max_pairs) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  auto fail = [&m](std::string why) {
    m.reason = std::move(why);
    spdlog::warn("kernel splice unavailable, passthrough relays with splice(2): {}", m.reason);
    if (m.skel) splice__destroy(m.skel);
    m.skel = nullptr;
  };
  m.skel = splice__open();
  if (!m.skel) {
    fail("open: " + libbpf_error(-errno));
    return;
  }
  const auto sockets = static_cast<uint32_t>(std::clamp<size_t>(2 * max_pairs, 2, 1u << 20));
  for (bpf_map* map :
       {m.skel->maps.zn_splice_targets, m.skel->maps.zn_splice_armed, m.skel->maps.zn_splice_sides})
    bpf_map__set_max_entries(map, sockets);
  if (int err = splice__load(m.skel)) {
    fail("load: " + libbpf_error(err));
    return;
  }
  m.targets = bpf_map__fd(m.skel->maps.zn_splice_targets);
  m.armed = bpf_map__fd(m.skel->maps.zn_splice_armed);
  m.sides = bpf_map__fd(m.skel->maps.zn_splice_sides);
  // Attached to the map, not to a socket or a cgroup: it goes when the map
  // does, with the skeleton.
  if (bpf_prog_attach(bpf_program__fd(m.skel->progs.zn_splice_verdict), m.armed, BPF_SK_SKB_STREAM_VERDICT,
                      0) != 0) {
    fail(std::string("attach stream verdict: ") + std::strerror(errno));
    return;
  }
}

KernelSplice::~KernelSplice() = default;

bool KernelSplice::available() const { return impl_->skel != nullptr; }

const std::string& KernelSplice::unavailable_reason() const { return impl_->reason; }

int KernelSplice::armed_map_fd() const { return impl_->armed; }

int KernelSplice::sides_map_fd() const { return impl_->sides; }

size_t KernelSplice::entries() const {
  if (!available()) return 0;
  return count_keys(impl_->targets) + count_keys(impl_->armed) + count_keys(impl_->sides);
}

awaitable<KernelRelayResult> KernelSplice::relay(tcp::socket& guest, tcp::socket& upstream,
                                                 std::chrono::milliseconds idle_timeout,
                                                 std::atomic<uint64_t>* relayed) {
  KernelRelayResult result;
  const Impl& m = *impl_;
  const int g = guest.native_handle(), u = upstream.native_handle();
  const std::optional<uint64_t> gc = cookie_of(g), uc = cookie_of(u);
  if (!gc || !uc) co_return result;

  // One direction: bytes received on src go out of dst.
  struct Direction {
    int src, dst;
    uint64_t src_cookie;
    uint64_t dst_base;  // written into dst before the relay
    enum { kOpen, kDraining, kDone } state = kOpen;
    uint64_t expected = 0;  // kDraining: bytes to write into dst before its FIN
    bool quiet = false;     // src woke readable with nothing to do: poll it instead
  };

  // Insertion. The pair first becomes redirect targets (a sockhash with no
  // program: nothing changes for either socket yet), then gets its sides, then
  // is armed, so the verdict never runs on a socket whose peer is not yet a
  // target (a failed redirect drops the skb). Until a socket is armed its
  // bytes wait in its receive queue, and the verdict only runs on data that
  // arrives later: SO_RCVLOWAT makes TCP check the queue again
  // (tcp_set_rcvlowat -> tcp_data_ready -> sk_data_ready), which is the
  // verdict's now, so what was queued before is relayed too.
  const uint64_t gfd = static_cast<uint64_t>(g), ufd = static_cast<uint64_t>(u);
  const zn_splice_side gside{*uc, 0, 0}, uside{*gc, 0, 0};
  std::optional<uint64_t> gbase = bytes_written(g), ubase = bytes_written(u);
  if (!gbase || !ubase || bpf_map_update_elem(m.targets, &*gc, &gfd, BPF_NOEXIST) != 0) co_return result;
  if (bpf_map_update_elem(m.targets, &*uc, &ufd, BPF_NOEXIST) != 0 ||
      bpf_map_update_elem(m.sides, &*gc, &gside, BPF_NOEXIST) != 0 ||
      bpf_map_update_elem(m.sides, &*uc, &uside, BPF_NOEXIST) != 0) {
    m.remove(*gc);
    m.remove(*uc);
    co_return result;  // neither is armed: nothing moved, the caller relays
  }
  // A sockhash takes only established sockets: a FIN that came in since
  // refuses the arming. The guest first: refused, nothing has moved yet.
  if (bpf_map_update_elem(m.armed, &*gc, &gfd, BPF_NOEXIST) != 0) {
    m.remove(*gc);
    m.remove(*uc);
    co_return result;
  }
  result.relayed = true;
  if (relayed) ++*relayed;
  // The upstream refused: its stream is complete in its receive queue, and
  // the relay copies it to the guest itself (nothing else writes there).
  const bool upstream_armed = bpf_map_update_elem(m.armed, &*uc, &ufd, BPF_NOEXIST) == 0;
  const int one = 1;
  bool failed = ::setsockopt(g, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) != 0 ||
                ::setsockopt(u, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one)) != 0;

  Direction dirs[2] = {{g, u, *gc, *ubase}, {u, g, *uc, *gbase}};
  uint64_t copied_to_guest = 0;
  if (!failed && !upstream_armed) {
    std::array<uint8_t, 16384> buf;
    for (;;) {
      auto [rec, n] = co_await upstream.async_read_some(asio::buffer(buf), as_tuple);
      if (rec == asio::error::eof) break;
      if (rec) {
        failed = true;
        break;
      }
      auto [wec, written] = co_await asio::async_write(guest, asio::buffer(buf.data(), n), as_tuple);
      if (wec) {
        failed = true;
        break;
      }
      copied_to_guest += written;
    }
    ::shutdown(g, SHUT_WR);
    dirs[1].state = Direction::kDone;
  }
  const auto start = std::chrono::steady_clock::now();
  asio::steady_timer timer(guest.get_executor());
  std::chrono::microseconds drain_poll = kDrainPollMin;
  while (!failed) {
    for (Direction& d : dirs) {
      const short ev = poll_now(d.src);
      if (ev & POLLERR) {
        failed = true;
        break;
      }
      if (d.state == Direction::kOpen && (ev & (POLLRDHUP | POLLHUP))) {
        // The FIN is in: everything src will ever carry is its received
        // sequence space less the FIN (the caller read none of it).
        std::optional<TcpInfo> info = tcp_info_of(d.src);
        if (!info || info->bytes_received < 1) {
          failed = true;
          break;
        }
        d.expected = info->bytes_received - 1;
        d.state = Direction::kDraining;
      }
      if (d.state == Direction::kDraining) {
        // The redirect is asynchronous (the peer's psock backlog): the FIN
        // goes on only once dst has taken every byte redirected before it.
        std::optional<uint64_t> written = bytes_written(d.dst);
        if (!written) {
          failed = true;
          break;
        }
        if (*written - d.dst_base >= d.expected) {
          ::shutdown(d.dst, SHUT_WR);
          d.state = Direction::kDone;
          drain_poll = kDrainPollMin;
        }
      }
      if (d.state == Direction::kOpen && (ev & POLLIN)) d.quiet = true;
    }
    if (failed) break;
    if (dirs[0].state == Direction::kDone && dirs[1].state == Direction::kDone) break;

    // Activity is the verdict's: the last redirect either way.
    auto last = start;
    for (const Direction& d : dirs) {
      zn_splice_side side{};
      if (bpf_map_lookup_elem(m.sides, &d.src_cookie, &side) == 0 && side.last_ns != 0)
        last = std::max(last, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(side.last_ns)));
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= last + idle_timeout) {
      result.idle_closed = true;
      break;
    }
    auto deadline = last + idle_timeout;
    const bool polling = dirs[0].state == Direction::kDraining || dirs[1].state == Direction::kDraining ||
                         dirs[0].quiet || dirs[1].quiet;
    if (polling) {
      deadline = std::min(deadline, now + drain_poll);
      drain_poll = std::min(drain_poll * 2, kDrainPollMax);
    }
    timer.expires_at(deadline);
    // An open direction waits for its FIN (readable); an ended one, or one
    // that woke readable for nothing (a redirect racing the poll), only for an
    // error, so a socket that stays readable cannot spin the loop.
    auto kind = [](const Direction& d) {
      return d.state == Direction::kOpen && !d.quiet ? tcp::socket::wait_read : tcp::socket::wait_error;
    };
    co_await (guest.async_wait(kind(dirs[0]), as_tuple) || upstream.async_wait(kind(dirs[1]), as_tuple) ||
              timer.async_wait(as_tuple));
    for (Direction& d : dirs) d.quiet = false;
  }

  // Disarm first (the verdict stops), then read the final counts.
  bpf_map_delete_elem(m.armed, &*gc);
  bpf_map_delete_elem(m.armed, &*uc);
  zn_splice_side side{};
  if (bpf_map_lookup_elem(m.sides, &*gc, &side) == 0) result.from_guest = side.bytes;
  if (bpf_map_lookup_elem(m.sides, &*uc, &side) == 0) result.to_guest = side.bytes;
  result.to_guest += copied_to_guest;
  m.remove(*gc);
  m.remove(*uc);
  asio::error_code ignored;
  if (result.idle_closed) {
    // Abortive close on both sides (RST, no FIN before it), so neither end
    // mistakes the timeout for an orderly end of data.
    linger abort{1, 0};
    ::setsockopt(g, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    ::setsockopt(u, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    guest.close(ignored);
    upstream.close(ignored);
  } else if (failed) {
    ::shutdown(g, SHUT_RDWR);
    ::shutdown(u, SHUT_RDWR);
  }
  co_return result;
}

}  // namespace zn::proxy
