// Counting the frames a peer may send cheaply but not endlessly (SETTINGS,
// PING, RST_STREAM, tiny WINDOW_UPDATEs, empty DATA, header lists refused)
// and the header bytes it makes us decode: each kind in fixed windows of
// time against its RateBound (h2_limits.h).
//
// The clock is injected so tests can step through windows without sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "userspace/h2/h2_limits.h"

namespace zn::h2 {

using Clock = std::function<std::chrono::steady_clock::time_point()>;

// One bound's window: how many events since the window opened.
class RateWindow {
 public:
  explicit RateWindow(RateBound bound) : bound_(bound) {}
  // Counts `amount` events at `now`. False once the bound is exceeded in
  // the current window (and for every further event in it).
  bool note(std::chrono::steady_clock::time_point now, uint64_t amount = 1);

 private:
  RateBound bound_;
  std::chrono::steady_clock::time_point opened_{};
  uint64_t count_ = 0;
  bool started_ = false;
};

class FloodGuard {
 public:
  // `clock` may be empty: std::chrono::steady_clock::now.
  FloodGuard(const H2Limits& limits, Clock clock);

  // Counts `amount` (a frame, or decoded bytes) of the kind `limit` names
  // (one of the rate-bound limits). False: the peer is over the bound.
  bool note(Limit limit, uint64_t amount = 1);

 private:
  Clock clock_;
  RateWindow peer_resets_, settings_frames_, ping_frames_, small_window_updates_, empty_data_frames_,
      decoded_header_bytes_, header_list_refusals_;
};

}  // namespace zn::h2
