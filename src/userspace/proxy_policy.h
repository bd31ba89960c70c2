// The narrow interface between the transparent proxy and the broker: the
// proxy reports what it learnt of a connection, the broker says where (if
// anywhere) it may go. The proxy never sees policy, secrets or sessions.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "userspace/dns_address.h"

namespace zn::proxy {

struct ConnectionFacts {
  sockaddr_storage guest{};         // the guest's source address
  sockaddr_storage original_dst{};  // where the guest was connecting
  bool tls = false;                 // the first bytes were a TLS ClientHello
  std::optional<std::string> sni;   // lowercase
  bool sni_is_ip_literal = false;
};

struct UpstreamDecision {
  bool allow = false;
  std::string reason;    // why denied (audit)
  std::string session;   // "" when the guest is unknown
  std::string host;      // the name the verdict is about (SNI or address)
  // Where to connect: the broker's own resolution, never the guest's choice.
  std::vector<dns::IpAddress> addresses;
  uint16_t port = 0;
};

struct ConnectionSummary {
  std::string session, host;
  uint64_t bytes_from_guest = 0, bytes_to_guest = 0;
  std::chrono::milliseconds duration{0};
  std::string end;  // "closed", "upstream unreachable", ...
};

class ProxyPolicy {
 public:
  virtual ~ProxyPolicy() = default;
  // May block briefly (name resolution); the proxy calls it off its loop.
  virtual UpstreamDecision decide(const ConnectionFacts& facts) = 0;
  virtual void on_closed(const ConnectionSummary& summary) = 0;
};

}  // namespace zn::proxy
