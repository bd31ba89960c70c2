// The kernel-side relay of passthrough connections (issue 11): both sockets
// of a pair go into a sockhash whose sk_skb stream verdict (bpf/splice.bpf.c)
// redirects every skb one receives to the other's egress, so the bytes never
// reach the proxy's loop. The proxy only waits for the ends: a FIN becomes the
// peer's shutdown(SHUT_WR) once every byte before it has been written there,
// an error tears both down, and a pair quiet for the idle timeout is reset.
// Where the program cannot be loaded or attached, available() is false and
// the proxy relays with splice(2) instead.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zn::proxy {

struct KernelRelayResult {
  // False: the pair could not be inserted (a socket already closing, maps
  // full); nothing was changed and the caller relays another way.
  bool relayed = false;
  uint64_t from_guest = 0;   // bytes redirected guest -> upstream (after the insertion)
  uint64_t to_guest = 0;     // bytes redirected upstream -> guest
  bool idle_closed = false;  // reset at the idle timeout
};

class KernelSplice {
 public:
  // Loads the program with maps sized for `max_pairs` relays at once and
  // attaches it to its sockhash (nothing is pinned: all of it goes with this
  // object). Never throws: a failure leaves available() false with its
  // reason, logged once. Any thread.
  explicit KernelSplice(size_t max_pairs);
  ~KernelSplice();
  KernelSplice(const KernelSplice&) = delete;
  KernelSplice& operator=(const KernelSplice&) = delete;

  // Never blocks; any thread.
  bool available() const;
  const std::string& unavailable_reason() const;

  // Relays between two connected sockets until both directions have ended,
  // either has failed (both are shut down), or neither received a byte for
  // `idle_timeout` (both are reset: SO_LINGER {1,0} and closed). Data already
  // queued on either socket is relayed too, so the caller must not have read
  // from either (MSG_PEEK is fine): the kernel hands the verdict whole skbs,
  // and a partly read one would go on whole, its read bytes a second time.
  // Every map entry of the pair is removed before it returns. `relayed`, if
  // given, is incremented as soon as the kernel has the pair (before any byte
  // of it moves). Runs on the sockets' loop; never blocks. Requires available().
  asio::awaitable<KernelRelayResult> relay(asio::ip::tcp::socket& guest, asio::ip::tcp::socket& upstream,
                                           std::chrono::milliseconds idle_timeout,
                                           std::atomic<uint64_t>* relayed = nullptr);

  // Entries in the program's maps (sockets in either sockhash plus sides);
  // 0 when no relay runs. Tests. Any thread.
  size_t entries() const;
  // The sockhash the stream verdict is attached to, and the per-socket side
  // map: for tests that insert a socket on their own.
  int armed_map_fd() const;
  int sides_map_fd() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zn::proxy
