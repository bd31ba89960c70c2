// The response bytes one HTTP/2 guest connection may hold unsent while its
// guest does not take them (flow-control windows shut), and how its streams
// share them (issue 32). Before, each stream had a bound of its own (256
// KiB, kept in one string of twice that) and the connection none: 8
// connections of 32 streams that never opened their windows held 70 MB
// unsent, 175 MB allocated.
//
// A stream's exchange reads its upstream again only when its stream has
// room (H2GuestLeg::flush), so a guest that does not read stops the reads
// of its upstream, and TCP (an HTTP/2 upstream: its stream's window) holds
// the upstream back; nothing is dropped. Room for one more read (kRead):
//  - a stream holding nothing always has it: its guest took everything,
//    so a stream whose guest reads goes on however much the others hold.
//    The bound keeps a read's worth for each stream the connection may
//    have at once (`streams`) for that;
//  - any other stream needs it within its share (the rest of the bound
//    split over the streams relaying a response now, plus its read, at
//    most `stream`) and within the rest of the bound over all its streams.
// So the connection never holds more than `connection` (while each thing a
// stream adds is at most kRead), and a stream alone at most `stream`.
//
// The connection's loop only (its owner and its streams' exchanges).
#pragma once

#include <algorithm>
#include <cstddef>

#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {

class UnsentBudget {
 public:
  struct Bounds {
    size_t connection = 1024 * 1024;  // all its streams together
    size_t stream = 256 * 1024;       // one stream alone
    // The streams it has at once (its SETTINGS_MAX_CONCURRENT_STREAMS).
    // Each is an exchange; to an HTTP/1.1 upstream, with a connection of
    // its own (streams to an HTTP/2 upstream share one): fewer than the
    // codec's default, so one guest connection cannot open more upstream
    // connections than a few HTTP/1.1 guests would.
    size_t streams = 32;
  };
  // What an exchange adds at a time: one read of its upstream (an HTTP/2
  // upstream's leg hands out as much at most).
  static constexpr size_t kRead = kReadChunk;

  UnsentBudget() = default;
  explicit UnsentBudget(Bounds bounds) : bounds_(bounds) {}

  // A stream starts, or stops, relaying a response's body (or a tunnel).
  void join() { ++relaying_; }
  void leave() { --relaying_; }

  // Whether a stream holding `held` unsent, of the `total` its connection
  // holds, may read its upstream once more.
  bool room(size_t held, size_t total) {
    peak_ = std::max(peak_, total);
    if (held == 0) return true;
    return held + kRead <= share() && total + kRead <= shared();
  }
  // What a stream holding something may hold.
  size_t share() const { return std::min(bounds_.stream, kRead + shared() / std::max<size_t>(relaying_, 1)); }

  // A writer waits for room (held back by its guest), or stops waiting.
  void hold_back() { ++waiting_; }
  void let_go() { --waiting_; }

  const Bounds& bounds() const { return bounds_; }
  size_t relaying() const { return relaying_; }
  size_t waiting() const { return waiting_; }
  // The most the connection held unsent when a stream asked for room (it
  // asks after each thing it adds, so: the most it held).
  size_t peak() const { return peak_; }

 private:
  // The bound less a read for each stream that may hold nothing.
  size_t shared() const {
    const size_t kept = bounds_.streams * kRead;
    return bounds_.connection > kept ? bounds_.connection - kept : 0;
  }

  Bounds bounds_;
  size_t relaying_ = 0;
  size_t waiting_ = 0;
  size_t peak_ = 0;
};

}  // namespace zn::proxy
