// The transparent listener every steered guest TCP connection lands on
// (passthrough half of the proxy): reads the ClientHello with a size bound
// and a deadline, asks the ProxyPolicy, and either resets the connection or
// connects to the broker-chosen upstream, replays what the guest sent and
// moves bytes with splice(2) both ways, half-close included.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "userspace/proxy_policy.h"

namespace zn::proxy {

struct ProxyConfig {
  std::vector<std::string> addresses{"127.0.0.1", "::1"};
  uint16_t port = 15001;  // 0 picks one (tests)
  std::chrono::milliseconds hello_timeout{5000};    // slowloris bound on the first bytes
  std::chrono::milliseconds connect_timeout{5000};
  // A relayed connection with no byte in either direction for this long is
  // torn down, so idle guests cannot pin proxy resources forever.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  size_t max_connections = 4096;
};

struct ProxyCounters {
  uint64_t accepted = 0, allowed = 0, denied = 0, timed_out = 0, upstream_failures = 0, rejected_busy = 0,
           idle_closed = 0;
};

class TransparentProxy {
 public:
  // Binds (IP_TRANSPARENT, SO_MARK host reply) in the calling thread's netns
  // and starts its loop thread. Throws std::system_error.
  TransparentProxy(ProxyConfig config, ProxyPolicy& policy);
  ~TransparentProxy();
  TransparentProxy(const TransparentProxy&) = delete;
  TransparentProxy& operator=(const TransparentProxy&) = delete;

  uint16_t port() const;
  ProxyCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zn::proxy
