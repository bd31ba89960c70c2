#include "userspace/net/local_addresses.h"

#include <linux/if.h>
#include <linux/rtnetlink.h>
#include <netlink/cache.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/route.h>
#include <netlink/socket.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <set>
#include <tuple>
#include <unordered_map>
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

// A route's destination prefix; with whole_address, an interface address
// itself (its nl_addr carries the subnet's length, which is not what is local).
std::optional<AddressPrefix> prefix_of(nl_addr* a, bool whole_address = false) {
  if (!a) return std::nullopt;
  const int family = nl_addr_get_family(a);
  const size_t size = family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
  if (size == 0 || nl_addr_get_len(a) != size) return std::nullopt;
  AddressPrefix p;
  p.network.family = family;
  std::memcpy(p.network.bytes.data(), nl_addr_get_binary_addr(a), size);
  p.length = whole_address ? static_cast<unsigned>(size * 8)
                           : std::min<unsigned>(nl_addr_get_prefixlen(a), static_cast<unsigned>(size * 8));
  // The kernel keys routes by network, but be exact: clear host bits.
  for (unsigned bit = p.length; bit < size * 8; ++bit)
    p.network.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
  return p;
}

// Where a local prefix comes from: an address on a link (kind 0), or a route
// of the local table of a type (RTN_*) through a link. Sets of these are
// idempotent, so a notification the dump already showed applies harmlessly.
// Ordered by link first: a link's sources are one range.
struct Source {
  int ifindex = 0;
  uint8_t kind = 0;
  AddressPrefix prefix;
  auto operator<=>(const Source&) const = default;
};

std::optional<Source> route_source(rtnl_route* r) {
  const uint8_t type = rtnl_route_get_type(r);
  if (rtnl_route_get_table(r) != RT_TABLE_LOCAL) return std::nullopt;
  if (type != RTN_LOCAL && type != RTN_BROADCAST && type != RTN_ANYCAST) return std::nullopt;
  auto p = prefix_of(rtnl_route_get_dst(r));
  if (!p) return std::nullopt;
  rtnl_nexthop* nh = rtnl_route_get_nnexthops(r) > 0 ? rtnl_route_nexthop_n(r, 0) : nullptr;
  return Source{nh ? rtnl_route_nh_get_ifindex(nh) : 0, type, *p};
}

std::optional<Source> address_source(rtnl_addr* a) {
  auto p = prefix_of(rtnl_addr_get_local(a), /*whole_address=*/true);
  if (!p) return std::nullopt;
  return Source{rtnl_addr_get_ifindex(a), 0, *p};
}

AddressPrefix masked(const IpAddress& a, unsigned length) {
  AddressPrefix p{a, length};
  for (unsigned byte = length / 8; byte < a.size(); ++byte)
    p.network.bytes[byte] &= byte == length / 8 ? static_cast<uint8_t>(0xff00 >> (length % 8)) : 0;
  return p;
}

// The local prefixes inside the churning regions, by reference count (a
// prefix can come from several sources), changed in place under a lock held
// only for one update or one lookup; with the lengths present, so a lookup
// is a hash probe per length (a handful), not a scan.
class ChurningTable {
 public:
  struct Hash {
    size_t operator()(const AddressPrefix& p) const noexcept {
      uint64_t h = 1469598103934665603ull ^ (static_cast<uint64_t>(p.network.family) << 8) ^ p.length;
      for (uint8_t b : p.network.bytes) h = (h ^ b) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  using Refs = std::unordered_map<AddressPrefix, unsigned, Hash>;

  void add(const AddressPrefix& p) {
    std::lock_guard lock(mu_);
    if (refs_[p]++ == 0) count_length(p, +1);
  }
  void remove(const AddressPrefix& p) {
    std::lock_guard lock(mu_);
    auto it = refs_.find(p);
    if (it == refs_.end()) return;
    if (--it->second == 0) {
      refs_.erase(it);
      count_length(p, -1);
    }
  }
  // All at once (a whole re-read): a lookup sees the old table or the new,
  // never an empty one in between.
  void replace(Refs refs) {
    std::lock_guard lock(mu_);
    refs_ = std::move(refs);
    counts_ = {};
    lengths_ = {};
    for (const auto& [p, n] : refs_) count_length(p, +1);
  }
  std::optional<AddressPrefix> find(const IpAddress& a) const {
    std::lock_guard lock(mu_);
    for (unsigned length : lengths_[a.family == AF_INET ? 0 : 1]) {
      const AddressPrefix key = masked(a, length);
      if (refs_.count(key)) return key;
    }
    return std::nullopt;
  }
  void append_to(std::vector<AddressPrefix>& out) const {
    std::lock_guard lock(mu_);
    for (const auto& [p, n] : refs_) out.push_back(p);
  }

 private:
  void count_length(const AddressPrefix& p, int delta) {
    const int f = p.network.family == AF_INET ? 0 : 1;
    unsigned& n = counts_[f][p.length];
    const bool was = n > 0;
    n += delta;
    if (was == (n > 0)) return;
    std::vector<unsigned>& l = lengths_[f];
    l.clear();
    for (unsigned len = 129; len-- > 0;)
      if (counts_[f][len]) l.push_back(len);  // longest first
  }

  mutable std::mutex mu_;
  Refs refs_;
  std::array<std::array<unsigned, 129>, 2> counts_{};  // [IPv4, IPv6][length]
  std::array<std::vector<unsigned>, 2> lengths_;       // present, longest first
};

}  // namespace

struct LocalAddresses::Netlink {
  SockPtr events;  // subscribed to the address and route groups
  SockPtr dump;    // requests the tables
  std::mutex dump_mu;
  // The tables as last read plus the notifications since, under dump_mu.
  std::set<Source> sources;
  std::map<AddressPrefix, unsigned> refs;  // prefix -> sources giving it (outside the churning regions)
  std::vector<AddressPrefix> churning;     // regions whose prefixes go to `churn`
  ChurningTable churn;
  int msg_type = 0;      // of the message being parsed
  bool applied = false;  // the snapshot's part changed since the last publish

  bool churns(const AddressPrefix& p) const {
    return std::any_of(churning.begin(), churning.end(), [&](const AddressPrefix& r) { return p.within(r); });
  }
  void count(const AddressPrefix& p) {
    if (churns(p)) {
      churn.add(p);
      return;
    }
    ++refs[p];
    applied = true;
  }
  void uncount(const AddressPrefix& p) {
    if (churns(p)) {
      churn.remove(p);
      return;
    }
    applied = true;
    auto it = refs.find(p);
    if (it != refs.end() && --it->second == 0) refs.erase(it);
  }
  void add(const Source& s) {
    if (sources.insert(s).second) count(s.prefix);
  }
  void remove(const Source& s) {
    if (sources.erase(s) != 0) uncount(s.prefix);
  }
  // The kernel drops some routes without a notification: a link's IPv4
  // broadcast routes when it goes down, and whatever is left through a link
  // when it is deleted. Link notifications stand in for those.
  void forget_link(int ifindex, bool broadcast_only) {
    auto it = sources.lower_bound(Source{ifindex, 0, {}});
    while (it != sources.end() && it->ifindex == ifindex) {
      if (broadcast_only && !(it->kind == RTN_BROADCAST && it->prefix.network.family == AF_INET)) {
        ++it;
        continue;
      }
      uncount(it->prefix);
      it = sources.erase(it);
    }
  }
  void apply(nl_object* o) {
    if (msg_type == RTM_NEWLINK || msg_type == RTM_DELLINK) {
      auto* link = reinterpret_cast<rtnl_link*>(o);
      if (msg_type == RTM_DELLINK)
        forget_link(rtnl_link_get_ifindex(link), false);
      else if (!(rtnl_link_get_flags(link) & IFF_UP))
        forget_link(rtnl_link_get_ifindex(link), true);
      return;
    }
    std::optional<Source> s;
    const bool add_it = msg_type == RTM_NEWADDR || msg_type == RTM_NEWROUTE;
    if (msg_type == RTM_NEWADDR || msg_type == RTM_DELADDR)
      s = address_source(reinterpret_cast<rtnl_addr*>(o));
    else if (msg_type == RTM_NEWROUTE || msg_type == RTM_DELROUTE)
      s = route_source(reinterpret_cast<rtnl_route*>(o));
    if (!s) return;
    if (add_it)
      add(*s);
    else
      remove(*s);
  }
};

void LocalSnapshot::seal(bool sorted_unique) {
  if (!sorted_unique) {
    std::sort(prefixes.begin(), prefixes.end());
    prefixes.erase(std::unique(prefixes.begin(), prefixes.end()), prefixes.end());
  }
  std::set<unsigned, std::greater<>> l4, l6;
  for (const AddressPrefix& p : prefixes) (p.network.family == AF_INET ? l4 : l6).insert(p.length);
  lengths4_.assign(l4.begin(), l4.end());
  lengths6_.assign(l6.begin(), l6.end());
}

std::optional<AddressPrefix> LocalSnapshot::find(const IpAddress& address) const {
  const IpAddress a = unmap_ipv4(address);
  for (unsigned length : a.family == AF_INET ? lengths4_ : lengths6_) {
    const AddressPrefix key = masked(a, length);
    if (std::binary_search(prefixes.begin(), prefixes.end(), key)) return key;
  }
  return std::nullopt;
}

LocalAddresses::LocalAddresses(std::vector<AddressPrefix> churning) : nl_(std::make_unique<Netlink>()) {
  nl_->churning = std::move(churning);
  nl_->dump = connected_socket("netlink (local table)");
  nl_->events = SockPtr(nl_socket_alloc());
  if (!nl_->events) throw std::system_error(ENOMEM, std::generic_category(), "netlink (events)");
  // Notifications carry no sequence numbers of ours.
  nl_socket_disable_seq_check(nl_->events.get());
  nl_socket_modify_cb(
      nl_->events.get(), NL_CB_VALID, NL_CB_CUSTOM,
      [](nl_msg* msg, void* arg) -> int {
        auto* nl = static_cast<Netlink*>(arg);
        nl->msg_type = nlmsg_hdr(msg)->nlmsg_type;
        nl_msg_parse(
            msg, [](nl_object* o, void* arg2) { static_cast<Netlink*>(arg2)->apply(o); }, nl);
        return NL_OK;
      },
      nl_.get());
  if (int err = nl_connect(nl_->events.get(), NETLINK_ROUTE); err < 0) fail(err, "netlink (events)");
  // Subscribe before the first read, so no change falls between the two.
  if (int err = nl_socket_add_memberships(nl_->events.get(), RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR,
                                          RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE, RTNLGRP_LINK, 0);
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

std::optional<AddressPrefix> LocalAddresses::find(const IpAddress& address) const {
  const IpAddress a = unmap_ipv4(address);
  if (auto p = snapshot()->find(a)) return p;
  return nl_->churn.find(a);
}

std::vector<AddressPrefix> LocalAddresses::prefixes() const {
  std::vector<AddressPrefix> out = snapshot()->prefixes;
  nl_->churn.append_to(out);
  std::sort(out.begin(), out.end());
  return out;
}

LocalAddresses::~LocalAddresses() {
  uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  ::close(stop_fd_);
}

void LocalAddresses::publish() {
  auto next = std::make_shared<LocalSnapshot>();
  next->prefixes.reserve(nl_->refs.size());
  for (const auto& [prefix, count] : nl_->refs) next->prefixes.push_back(prefix);
  // A map's keys come sorted and unique: no sort per publish (with a TAP
  // made or deleted every few ms, the sort of ~40k prefixes was 5 % of
  // zerod's CPU while creating 10,000 sessions).
  next->seal(/*sorted_unique=*/true);
  next->generation = ++generation_;
  nl_->applied = false;
  std::shared_ptr<const LocalSnapshot> old;
  {
    std::lock_guard lock(current_mu_);
    old = std::exchange(current_, std::move(next));
  }
  // `old` is freed here, outside the lock, if no reader still holds it.
}

void LocalAddresses::refresh() {
  std::set<Source> sources;
  std::lock_guard lock(nl_->dump_mu);
  nl_cache* raw = nullptr;
  if (int err = rtnl_route_alloc_cache(nl_->dump.get(), AF_UNSPEC, 0, &raw); err < 0) fail(err, "route dump");
  CachePtr routes(raw);
  for (nl_object* o = nl_cache_get_first(routes.get()); o; o = nl_cache_get_next(o))
    if (auto s = route_source(reinterpret_cast<rtnl_route*>(o))) sources.insert(*s);
  raw = nullptr;
  if (int err = rtnl_addr_alloc_cache(nl_->dump.get(), &raw); err < 0) fail(err, "address dump");
  CachePtr addrs(raw);
  for (nl_object* o = nl_cache_get_first(addrs.get()); o; o = nl_cache_get_next(o))
    if (auto s = address_source(reinterpret_cast<rtnl_addr*>(o))) sources.insert(*s);
  nl_->refs.clear();
  ChurningTable::Refs churn;
  for (const Source& s : sources) {
    if (nl_->churns(s.prefix))
      ++churn[s.prefix];
    else
      ++nl_->refs[s.prefix];
  }
  nl_->sources = std::move(sources);
  nl_->churn.replace(std::move(churn));
  ++full_reads_;
  publish();
}

void LocalAddresses::watch() {
  using Clock = std::chrono::steady_clock;
  // A burst (a TAP created or deleted is a dozen address, route and link
  // notifications) is published once, at most this long after its first
  // change: a new local address is refused within ~10 ms, and a host making
  // hundreds of TAPs a second publishes ~100 snapshots a second, not one per
  // notification (a publish copies the table: ~1 ms at 10k TAPs).
  constexpr auto kCoalesce = std::chrono::milliseconds(10);
  std::optional<Clock::time_point> due;
  bool lost = false;  // notifications were lost: re-read (retried each second until it works)
  pollfd fds[2] = {{nl_socket_get_fd(nl_->events.get()), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    int timeout = lost ? 1000 : -1;
    if (due)
      timeout = static_cast<int>(
          std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(*due - Clock::now()).count()));
    const int n = ::poll(fds, 2, timeout);
    if (n < 0 && errno != EINTR) return;
    if (n > 0 && fds[1].revents) return;
    if (n > 0 && fds[0].revents) {
      std::lock_guard lock(nl_->dump_mu);
      for (;;) {
        const int err = nl_recvmsgs_default(nl_->events.get());
        if (err == -NLE_AGAIN) break;
        if (err < 0) {
          lost = true;  // overrun (-NLE_NOMEM is ENOBUFS) or similar: messages lost
          if (err != -NLE_NOMEM && err != -NLE_INTR) break;
        }
      }
    }
    try {
      if (lost) {
        refresh();  // publishes
        lost = false;
        due.reset();
        continue;
      }
      std::lock_guard lock(nl_->dump_mu);
      if (!nl_->applied) {
        due.reset();
        continue;
      }
      if (!due) due = Clock::now() + kCoalesce;
      if (Clock::now() >= *due) {
        publish();
        due.reset();
      }
    } catch (const std::exception&) {
      // Keep the last snapshot; the next event retries the re-read.
    }
  }
}

}  // namespace zn::net
