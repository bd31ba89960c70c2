// Allowed names resolved by an upstream DNS server through c-ares. One
// c-ares channel, driven by a poll loop on the resolver's own thread (the
// channel is touched only there). Answers are parsed with ldns; CNAME chains
// are flattened to the addresses of the asked type, TTL = smallest in the chain.
//
// The thread, and with it the upstream sockets, lives in the network
// namespace of the thread that constructs the resolver.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "userspace/dns/resolver.h"

namespace zn::dns {

struct AresConfig {
  // "192.0.2.53", "192.0.2.53:5353", "[2001:db8::53]:53" (c-ares CSV form, one per entry).
  std::vector<std::string> servers;
  std::chrono::milliseconds timeout{1000};  // per try; c-ares grows it per retry round
  int tries = 2;
  size_t max_pending = 1024;  // more in flight are answered ServFail at once
};

class AresResolver : public Resolver {
 public:
  explicit AresResolver(AresConfig config);  // throws std::runtime_error
  ~AresResolver() override;                  // pending callbacks get ServFail
  AresResolver(const AresResolver&) = delete;
  AresResolver& operator=(const AresResolver&) = delete;

  void resolve(const std::string& name, QType qtype, Callback callback) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The addresses of type qtype and the chain's smallest TTL in an upstream
// reply (ldns); rcode from the reply header. Unparseable replies: ServFail.
ResolveResult parse_upstream_reply(const unsigned char* wire, size_t size, QType qtype);

}  // namespace zn::dns
