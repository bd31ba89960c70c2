#include "userspace/net/local_addresses.h"

#include <linux/rtnetlink.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <system_error>

namespace zn::net {
namespace {

struct SockDeleter {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using SockPtr = std::unique_ptr<nl_sock, SockDeleter>;
struct CacheDeleter {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheDeleter>;

[[noreturn]] void fail(int nl_error, const char* what) {
  throw std::system_error(EIO, std::generic_category(), std::string(what) + ": " + nl_geterror(nl_error));
}

SockPtr connected_socket(const char* what) {
  SockPtr s(nl_socket_alloc());
  if (!s) throw std::system_error(ENOMEM, std::generic_category(), what);
  if (int err = nl_connect(s.get(), NETLINK_ROUTE); err < 0) fail(err, what);
  return s;
}

std::optional<AddressPrefix> prefix_of(nl_addr* a) {
  if (!a) return std::nullopt;
  const int family = nl_addr_get_family(a);
  const size_t size = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
  if (size == 0 || nl_addr_get_len(a) != size) return std::nullopt;
  AddressPrefix p;
  p.network.family = family;
  std::memcpy(p.network.bytes.data(), nl_addr_get_binary_addr(a), size);
  p.length = std::min<unsigned>(nl_addr_get_prefixlen(a), static_cast<unsigned>(size * 8));
  // The kernel keys routes by network, but be exact: clear host bits.
  for (unsigned bit = p.length; bit < size * 8; ++bit)
    p.network.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  return p;
}

}  // namespace

struct LocalAddresses::Netlink {
  SockPtr events;  // subscribed to the address and route groups
  SockPtr dump;    // requests the tables
  std::mutex dump_mu;
  bool stale = false;  // events' callback, watcher thread only
};

std::optional<AddressPrefix> LocalSnapshot::find(const IpAddress& address) const {
  const IpAddress a = unmap_ipv4(address);
  for (const AddressPrefix& p : prefixes)
    if (p.contains(a)) return p;
  return std::nullopt;
}

LocalAddresses::LocalAddresses() : nl_(std::make_unique<Netlink>()) {
  nl_->dump = connected_socket("netlink (local table)");
  nl_->events = SockPtr(nl_socket_alloc());
  if (!nl_->events) throw std::system_error(ENOMEM, std::generic_category(), "netlink (events)");
  // Notifications carry no sequence numbers of ours.
  nl_socket_disable_seq_check(nl_->events.get());
  nl_socket_modify_cb(
      nl_->events.get(), NL_CB_VALID, NL_CB_CUSTOM,
      [](nl_msg*, void* arg) -> int {
        static_cast<Netlink*>(arg)->stale = true;
        return NL_OK;
      },
      nl_.get());
  if (int err = nl_connect(nl_->events.get(), NETLINK_ROUTE); err < 0) fail(err, "netlink (events)");
  // Subscribe before the first read, so no change falls between the two.
  if (int err = nl_socket_add_memberships(nl_->events.get(), RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR,
                                          RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, 0);
      err < 0)
    fail(err, "netlink (memberships)");
  nl_socket_set_nonblocking(nl_->events.get());
  nl_socket_set_buffer_size(nl_->events.get(), 1 << 20, 0);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  try {
    refresh();
  } catch (...) {
    ::close(stop_fd_);
    throw;
  }
  thread_ = std::thread([this] { watch(); });
}

LocalAddresses::~LocalAddresses() {
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
}

void LocalAddresses::refresh() {
  auto next = std::make_shared<LocalSnapshot>();
  {
    std::lock_guard lock(nl_->dump_mu);
    nl_cache* raw = nullptr;
    if (int err = rtnl_route_alloc_cache(nl_->dump.get(), AF_UNSPEC, 0, &raw); err < 0)
      fail(err, "route dump");
    CachePtr routes(raw);
    for (nl_object* o = nl_cache_get_first(routes.get()); o; o = nl_cache_get_next(o)) {
      auto* r = reinterpret_cast<rtnl_route*>(o);
      const uint8_t type = rtnl_route_get_type(r);
      if (rtnl_route_get_table(r) != RT_TABLE_LOCAL) continue;
      if (type != RTN_LOCAL && type != RTN_BROADCAST && type != RTN_ANYCAST) continue;
      if (auto p = prefix_of(rtnl_route_get_dst(r))) next->prefixes.push_back(*p);
    }
    raw = nullptr;
    if (int err = rtnl_addr_alloc_cache(nl_->dump.get(), &raw); err < 0) fail(err, "address dump");
    CachePtr addrs(raw);
    for (nl_object* o = nl_cache_get_first(addrs.get()); o; o = nl_cache_get_next(o)) {
      if (auto p = prefix_of(rtnl_addr_get_local(reinterpret_cast<rtnl_addr*>(o)))) {
        p->length = p->network.family == AF_INET ? 32 : 128;  // the address itself, not its subnet
        next->prefixes.push_back(*p);
      }
    }
    std::sort(next->prefixes.begin(), next->prefixes.end());
    next->prefixes.erase(std::unique(next->prefixes.begin(), next->prefixes.end()), next->prefixes.end());
    next->generation = ++generation_;
  }
  current_.store(std::move(next));
}

void LocalAddresses::watch() {
  pollfd fds[2] = {{nl_socket_get_fd(nl_->events.get()), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    // A periodic re-read as well: a lost notification (buffer overrun) must
    // not leave a stale table for long.
    const int n = ::poll(fds, 2, 30000);
    if (n < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    bool changed = n == 0;
    if (fds[0].revents) {
      // Drain everything queued, then read the tables once.
      for (;;) {
        const int err = nl_recvmsgs_default(nl_->events.get());
        if (err == -NLE_AGAIN) break;
        if (err < 0) {
          changed = true;  // overrun (-NLE_NOMEM) or similar: messages lost
          if (err != -NLE_NOMEM && err != -NLE_INTR) break;
        }
      }
      changed = changed || nl_->stale;
      nl_->stale = false;
    }
    if (!changed) continue;
    try {
      refresh();
    } catch (const std::exception&) {
      // Keep the last snapshot; the next event or the timer retries.
    }
  }
}

}  // namespace zn::net
