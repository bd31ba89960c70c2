// What the proxy's listener tests (root: IP_TRANSPARENT) share: a guest on
// loopback (a TCP connection to the proxy's port from a chosen 127.0.0.0/8
// source; each source address is another guest), and a broker that only
// decides connections (every request-level call answers nothing).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

#include "userspace/proxy/policy.h"

namespace zn::proxy::test {

inline int connect_from(uint16_t port, const char* source) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  return fd;
}

// A broker whose tests are about connections: decide() is the test's.
class ConnectionPolicy : public ProxyPolicy {
 public:
  RequestDecision decide_request(const RequestFacts&) override { return {}; }
  HoldState hold_state(const std::string&, uint64_t) override { return {}; }
  UpstreamAddresses resolve_upstream(const std::string&, const std::string&) override { return {}; }
  std::optional<Injection> injection_for(const std::string&, const RuleRef&) override { return std::nullopt; }
  void on_request_done(const RequestSummary&) override {}
  void on_closed(const ConnectionSummary&) override {}
};

}  // namespace zn::proxy::test
