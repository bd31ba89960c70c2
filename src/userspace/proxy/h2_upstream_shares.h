// The HTTP/2 upstream connections open now (h2_upstream_connection.h), by
// session, host, port, scheme and identity (UpstreamKey) and by the I/O loop
// that owns each: an exchange needing an upstream takes a new stream of one
// of these before it connects anew. A connection is only ever handed to an
// exchange of the same key (it never carries another session's or another
// identity's request) on its own loop. Holds no connection alive: each
// lives while its owner runs (until the upstream ends it, or it idles out)
// or a leg holds it. Thread-safe.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "userspace/proxy/h2_upstream_connection.h"
#include "userspace/proxy/upstream_pool.h"

namespace zn::proxy {

class H2UpstreamShares {
 public:
  // `idle`: how long a connection stays open with no stream.
  explicit H2UpstreamShares(std::chrono::milliseconds idle = std::chrono::seconds(30)) : idle_(idle) {}

  // A connection for `key` on `loop` (the caller's: its state is read
  // here) that takes another stream now; null if none.
  std::shared_ptr<H2UpstreamConnection> find(const UpstreamKey& key, const asio::any_io_executor& loop);
  // Makes `connection` (started, on its loop) findable for `key`.
  void add(UpstreamKey key, const std::shared_ptr<H2UpstreamConnection>& connection);

  // A connect in flight for a key on a loop. The exchanges that need the
  // same key meanwhile wait for it (up to their connect timeout) and look
  // again, instead of each opening a connection of its own: a guest's
  // burst of streams would otherwise open as many upstream connections
  // before the first could be shared. Touched only on its loop.
  struct Connecting {
    UpstreamKey key;
    asio::any_io_executor loop;
    bool finished = false;
    std::optional<asio::steady_timer> signal;  // cancelled when finished
  };
  // The connect in flight for `key` on `loop` to wait for (first: false),
  // or a new one the caller makes (first: true; it calls finish after).
  struct Join {
    bool first = false;
    std::shared_ptr<Connecting> connecting;
  };
  Join join(const UpstreamKey& key, const asio::any_io_executor& loop);
  // The connect ended (whatever its outcome): its waiters look again.
  void finish(const std::shared_ptr<Connecting>& connecting);
  std::chrono::milliseconds idle() const { return idle_; }
  // Connections still alive.
  size_t size();

 private:
  struct Entry {
    UpstreamKey key;
    asio::any_io_executor loop;
    std::weak_ptr<H2UpstreamConnection> connection;
  };
  void prune();  // under mu_

  std::chrono::milliseconds idle_;
  std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<std::shared_ptr<Connecting>> connecting_;
};

}  // namespace zn::proxy
