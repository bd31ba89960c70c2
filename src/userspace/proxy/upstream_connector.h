// The one way the proxy reaches an upstream, for passthrough and interception
// alike. Each candidate address the broker chose is judged again by the
// destination guard on the very address about to be connected (the backstop:
// the local table or a resolution may have changed since the broker decided),
// then connected under a deadline; the first address that connects — and
// passes the caller's handshake, if any — wins. Errors are values.
// Runs on the proxy's I/O loop (the coroutine's executor); never blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio.hpp>

#include "userspace/net/address.h"
#include "userspace/proxy/destination_guard.h"

namespace zn::proxy {

struct UpstreamConnection {
  // Connected (and handshaken) on success; null otherwise. Heap-held so a
  // stream built on it by the handshake keeps a stable reference.
  std::unique_ptr<asio::ip::tcp::socket> socket;
  std::string upstream;    // "198.18.0.10:443" / "[2001:db8::1]:443" when connected
  bool attempted = false;  // false: the guard refused every address (or there were none)
  std::string refused;     // the guard's reason for the last address it refused
  std::string last_error;  // why the last attempted address failed
};

// A step after the TCP connect (interception's upstream TLS handshake):
// nullopt on success, else why it failed, and the next address is tried.
using UpstreamHandshake = std::function<asio::awaitable<std::optional<std::string>>(
    asio::ip::tcp::socket&, const std::string& upstream)>;

// `guard` null refuses everything (fail closed).
asio::awaitable<UpstreamConnection> connect_upstream(const std::vector<net::IpAddress>& addresses,
                                                     uint16_t port, const DestinationGuard* guard,
                                                     std::chrono::steady_clock::duration timeout,
                                                     const UpstreamHandshake& handshake = {});

}  // namespace zn::proxy
