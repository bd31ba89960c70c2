// Names answered from configuration, never from the network (the lab's
// resolver, and operator overrides).
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "userspace/dns/resolver.h"

namespace zn::dns {

class StaticResolver : public Resolver {
 public:
  using Table = std::map<std::string, std::vector<net::IpAddress>>;  // lowercase name -> addresses

  // Names not in the table are NXDOMAIN; a name without addresses of the
  // asked family is NODATA. Keys are lowercased, trailing dots removed.
  explicit StaticResolver(const Table& table, uint32_t ttl = 60);

  void resolve(const std::string& name, QType qtype, Callback callback) override;

  // How many resolve() calls it has seen (tests assert denied names never arrive).
  uint64_t calls() const { return calls_.load(); }

 private:
  Table table_;
  uint32_t ttl_;
  std::atomic<uint64_t> calls_{0};
};

}  // namespace zn::dns
