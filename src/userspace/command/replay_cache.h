// The agent's memory of envelopes it has accepted (issue 15): a nonce seen
// within the freshness window is a replay. Entries older than the window can
// go, since their envelopes are refused as stale anyway; the cache is
// bounded, and when it is full of fresh entries a new envelope is refused
// (never an old nonce forgotten early).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "userspace/command/envelope.h"

namespace zn::command {

class ReplayCache {
 public:
  explicit ReplayCache(size_t capacity = 65536) : capacity_(capacity) {}

  // The whole freshness check of a verified header: the session, the
  // window around `now`, the nonce. Remembers the nonce when accepted.
  Rejection admit(const EnvelopeHeader& header, const std::string& own_session,
                  std::chrono::system_clock::time_point now, std::chrono::milliseconds window);
  size_t size() const { return seen_.size(); }

 private:
  size_t capacity_;
  std::map<std::string, int64_t> seen_;  // nonce -> issued (ms)
};

}  // namespace zn::command
