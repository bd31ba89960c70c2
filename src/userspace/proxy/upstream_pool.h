// Idle upstream connections kept across guest connections, so a guest that
// opens a new connection per request (most clients, most SDKs) does not pay
// an upstream TCP and TLS handshake each time. An entry is only ever handed
// to a request of the same session, host, port, scheme and identity (an
// upstream connection never carries another session's or another identity's
// request), on the loop that owns its socket, and only while idle for less
// than the idle bound. Thread-safe.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "userspace/proxy/session_sockets.h"
#include "userspace/proxy/upstream_leg.h"

namespace zn::proxy {

struct IdleUpstream {
  std::unique_ptr<asio::ip::tcp::socket> socket;
  std::unique_ptr<UpstreamLeg> leg;  // over *socket; destroyed first
  std::string connected;             // "198.18.0.10:443"
  SessionSockets::Slot slot;         // the socket's place in its session's cap
};

struct UpstreamKey {
  std::string session, host, identity;  // identity: "" when none was injected
  uint16_t port = 0;
  bool tls = false;
  bool operator==(const UpstreamKey&) const = default;
};

struct UpstreamPoolConfig {
  std::chrono::milliseconds idle{std::chrono::seconds(30)};  // kept at most this long unused
  // Idle connections per key (a session's to one host with one identity):
  // as many as two HTTP/2 guest connections have streams in flight
  // (h2_intercept.cpp). A response given back past the bound closes the
  // oldest, and the next stream pays a fresh upstream TCP and TLS handshake:
  // at 32, 4 guest connections x 10 streams (the h2load figure) closed 8 of
  // every 40, and upstream handshakes were 16 % of the loops' time. Each
  // idle connection still counts in its session's cap and in `total`.
  size_t per_key = 64;
  size_t total = 512;  // idle connections in all
};

class UpstreamPool {
 public:
  using Clock = std::chrono::steady_clock;
  explicit UpstreamPool(UpstreamPoolConfig config = {}) : config_(config) {}

  // The most recently idled connection for `key` whose socket runs on
  // `loop`, still open and with nothing unread (a server that closed, or
  // sent anything while idle, is dropped); nullopt if none.
  std::optional<IdleUpstream> take(const UpstreamKey& key, const asio::any_io_executor& loop,
                                   Clock::time_point now = Clock::now());
  // Keeps an idle connection at a request boundary (the last response read
  // whole, nothing buffered). The oldest go first past the bounds.
  void give(UpstreamKey key, IdleUpstream up, Clock::time_point now = Clock::now());
  // Closes the idle connections of `session` (to make room in its cap for a
  // new one); how many.
  size_t drop_session(const std::string& session);
  // Closes everything kept. Call once the loops have stopped (the sockets
  // belong to them), before they are destroyed.
  void clear();
  size_t size() const;

 private:
  struct Entry {
    UpstreamKey key;
    IdleUpstream up;
    Clock::time_point since;
  };
  UpstreamPoolConfig config_;
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // oldest first
};

}  // namespace zn::proxy
