// What this network namespace treats as itself: the prefixes of the kernel's
// local routing table (table 255: RTN_LOCAL, RTN_BROADCAST, RTN_ANYCAST), plus
// every interface address (a tentative IPv6 address may not have its local
// route yet). A connect to any of these lands on a socket of this host, never
// on the internet, so the proxy must not make one on a guest's behalf.
//
// Kept current: a netlink socket subscribed to the address and route groups
// feeds the watcher thread, which applies each RTM_NEWADDR/DELADDR and
// RTM_NEWROUTE/DELROUTE from the message itself, drains whatever is queued,
// then publishes one new immutable snapshot for the burst (a shared_ptr
// swapped under a mutex held only for the swap or the copy: libstdc++ 12's
// std::atomic<std::shared_ptr> guards the pointer with a lock bit that
// ThreadSanitizer cannot see, so every reader was reported as a race). The tables are re-read whole only when
// notifications were lost (socket overrun, ENOBUFS): a host with thousands of TAPs changes addresses on every
// session create and delete, and a dump per event was most of the broker's CPU. Lookups never block and never
// touch netlink, so they may run on the proxy's I/O loop.
//
// Churning regions (zerod's guest pools, IPv6 link-local): the local
// prefixes inside them come and go with every session's TAP, so they are
// kept apart, in a hash table changed in place under its own short lock,
// not in the snapshot, which a publish copies whole. At 10,000 sessions
// each create and delete republished ~40k prefixes: 7 % of zerod's CPU
// creating and 6 % deleting. A lookup checks both; nothing is less local.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "userspace/net/prefix.h"

namespace zn::net {

struct LocalSnapshot {
  std::vector<AddressPrefix> prefixes;  // sorted, unique
  uint64_t generation = 0;              // bumped on every publish

  // The local prefix covering `address` (IPv4-mapped looked up as IPv4): a
  // binary search per prefix length present (a handful), not a scan.
  std::optional<AddressPrefix> find(const IpAddress& address) const;

  // Sorts, dedups (unless they already are) and indexes `prefixes`; call
  // after filling them.
  void seal(bool sorted_unique = false);

 private:
  std::vector<unsigned> lengths4_, lengths6_;  // the lengths present, longest first
};

class LocalAddresses {
 public:
  // Opens its netlink sockets in the calling thread's network namespace (a
  // socket stays in the namespace it was made in, whatever thread reads it),
  // reads the tables once and starts the watcher. Local prefixes inside a
  // `churning` region are kept in the churning table. Throws std::system_error.
  explicit LocalAddresses(std::vector<AddressPrefix> churning = {});
  ~LocalAddresses();
  LocalAddresses(const LocalAddresses&) = delete;
  LocalAddresses& operator=(const LocalAddresses&) = delete;

  // The local prefixes outside the churning regions.
  std::shared_ptr<const LocalSnapshot> snapshot() const {
    std::lock_guard lock(current_mu_);
    return current_;
  }
  // The local prefix covering `address`, from the snapshot or the churning
  // table (IPv4-mapped looked up as IPv4).
  std::optional<AddressPrefix> find(const IpAddress& address) const;
  // Every local prefix, both parts, sorted (tests, diagnostics).
  std::vector<AddressPrefix> prefixes() const;

  // Re-reads the tables now (tests, and a fallback if notifications were lost).
  void refresh();
  // Whole re-reads so far, the constructor's included (tests, metrics).
  uint64_t full_reads() const { return full_reads_.load(); }

 private:
  void watch();
  void publish();  // from the watcher's tables; dump_mu held

  struct Netlink;
  std::unique_ptr<Netlink> nl_;
  mutable std::mutex current_mu_;  // held only to copy or swap current_
  std::shared_ptr<const LocalSnapshot> current_;
  std::atomic<uint64_t> full_reads_{0};
  uint64_t generation_ = 0;  // dump_mu held
  int stop_fd_ = -1;         // eventfd: wakes the watcher to exit
  std::thread thread_;
};

}  // namespace zn::net
