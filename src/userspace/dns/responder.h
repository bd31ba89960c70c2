// The governed DNS responder: the host sockets the datapath assigns every
// guest DNS packet to (UDP and TCP, IPv4 and IPv6, any destination). Each
// query goes through QueryHandler; UDP replies leave from the guest's original
// destination (e.g. 8.8.8.8:53), TCP replies on the accepted connection.
//
// RAII: the constructor binds every socket (throws std::system_error if one
// cannot be bound) and starts one event-loop thread (standalone Asio); the
// destructor stops and joins it. Sockets, and the short-lived reply sockets,
// live in the network namespace of the constructing thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "userspace/datapath/maps.h"
#include "userspace/dns/counters.h"
#include "userspace/dns/policy.h"
#include "userspace/dns/query_handler.h"
#include "userspace/dns/resolver.h"

namespace zn::dns {

struct ResponderConfig {
  // One UDP socket and one TCP listener per address, all on `port` (the
  // datapath's Listeners::dns_ip4 / dns_ip6 / dns_port).
  std::vector<std::string> addresses{"127.0.0.1", "::1"};
  uint16_t port = ZN_DEFAULT_DNS_PORT;  // 0: the first socket picks one, the others share it
  HandlerConfig handler;
  size_t max_tcp_connections = 64;  // more are accepted and closed at once
  // One session's share of them (issue 32): a guest holding its
  // connections open cannot keep the others' TCP queries out. Sources of no
  // session (answered REFUSED) share one. More are accepted and closed.
  size_t max_tcp_per_session = 8;
  std::chrono::milliseconds tcp_idle_timeout{10000};  // per message, from its first byte wait
  size_t max_tcp_message = kMaxQuerySize;             // larger length prefixes close the connection
};

// Addresses and port of the datapath's DNS listener (what it assigns to).
ResponderConfig responder_config_for(const dp::Listeners& listeners);

class Responder {
 public:
  // policy and resolver must outlive the responder.
  Responder(ResponderConfig config, DnsPolicy& policy, Resolver& resolver);
  ~Responder();
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;

  uint16_t port() const;
  // The TCP listening sockets (one per address), for the datapath's
  // listener lookup (datapath/listener_lookup.h). Owned by the responder.
  std::vector<int> tcp_listener_fds() const;
  DnsCountersSnapshot counters() const;
  size_t tcp_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zn::dns
