// What this network namespace treats as itself: the prefixes of the kernel's
// local routing table (table 255: RTN_LOCAL, RTN_BROADCAST, RTN_ANYCAST), plus
// every interface address (a tentative IPv6 address may not have its local
// route yet). A connect to any of these lands on a socket of this host, never
// on the internet, so the proxy must not make one on a guest's behalf.
//
// Kept current: a netlink socket subscribed to the address and route groups
// marks the snapshot stale, and the watcher thread re-reads both tables and
// publishes a new immutable snapshot (atomic shared_ptr swap). Lookups never
// block and never touch netlink, so they may run on the proxy's I/O loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "userspace/net/prefix.h"

namespace zn::net {

struct LocalSnapshot {
  std::vector<AddressPrefix> prefixes;
  uint64_t generation = 0;  // bumped on every re-read

  // The local prefix covering `address` (IPv4-mapped looked up as IPv4).
  std::optional<AddressPrefix> find(const IpAddress& address) const;
};

class LocalAddresses {
 public:
  // Opens its netlink sockets in the calling thread's network namespace (a
  // socket stays in the namespace it was made in, whatever thread reads it),
  // reads the tables once and starts the watcher. Throws std::system_error.
  LocalAddresses();
  ~LocalAddresses();
  LocalAddresses(const LocalAddresses&) = delete;
  LocalAddresses& operator=(const LocalAddresses&) = delete;

  std::shared_ptr<const LocalSnapshot> snapshot() const { return current_.load(); }
  std::optional<AddressPrefix> find(const IpAddress& address) const { return snapshot()->find(address); }

  // Re-reads the tables now (tests, and a fallback if notifications were lost).
  void refresh();

 private:
  void watch();

  struct Netlink;
  std::unique_ptr<Netlink> nl_;
  std::atomic<std::shared_ptr<const LocalSnapshot>> current_;
  uint64_t generation_ = 0;  // watcher thread (and the constructor) only
  int stop_fd_ = -1;         // eventfd: wakes the watcher to exit
  std::thread thread_;
};

}  // namespace zn::net
