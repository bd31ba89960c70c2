// Relaying a connected pair of TCP sockets through the kernel's splice(2):
// the bytes go socket -> pipe -> socket and never through user memory. Used
// by the proxy's passthrough (when the sockmap relay is off or refused) and
// by the ingress of declared ports.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>

namespace zn::proxy {

// Last time a byte moved either way, shared by both directions of a relay.
struct Activity {
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  bool idle_closed = false;
};

// Moves bytes from -> to until `from` ends (then half-closes `to`), either
// socket fails, or neither direction moved a byte for `idle_timeout` (then
// both are reset, so neither end mistakes the timeout for an orderly end).
// On failure or timeout both sockets are shut down, so the other direction
// ends too. Returns the bytes moved. Runs on the sockets' loop; sets both
// sockets non-blocking (splice(2) would otherwise block the loop).
asio::awaitable<uint64_t> splice_one_way(asio::ip::tcp::socket& from, asio::ip::tcp::socket& to,
                                         Activity& activity, std::chrono::milliseconds idle_timeout);

}  // namespace zn::proxy
