#include "userspace/h2/flood_guard.h"

#include <algorithm>
#include <utility>

namespace zn::h2 {

bool RateWindow::note(std::chrono::steady_clock::time_point now, uint64_t amount) {
  if (!started_ || now - opened_ >= bound_.window) {
    started_ = true;
    opened_ = now;
    count_ = 0;
  }
  count_ += std::min<uint64_t>(amount, UINT64_MAX - count_);
  return count_ <= bound_.events;
}

FloodGuard::FloodGuard(const H2Limits& limits, Clock clock)
    : clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })),
      peer_resets_(limits.peer_resets),
      settings_frames_(limits.settings_frames),
      ping_frames_(limits.ping_frames),
      small_window_updates_(limits.small_window_updates),
      empty_data_frames_(limits.empty_data_frames),
      decoded_header_bytes_(limits.decoded_header_bytes),
      header_list_refusals_(limits.header_list_refusals) {}

bool FloodGuard::note(Limit limit, uint64_t amount) {
  const auto now = clock_();
  switch (limit) {
    case Limit::peer_resets:
      return peer_resets_.note(now, amount);
    case Limit::settings_frames:
      return settings_frames_.note(now, amount);
    case Limit::ping_frames:
      return ping_frames_.note(now, amount);
    case Limit::small_window_updates:
      return small_window_updates_.note(now, amount);
    case Limit::empty_data_frames:
      return empty_data_frames_.note(now, amount);
    case Limit::decoded_header_bytes:
      return decoded_header_bytes_.note(now, amount);
    case Limit::header_list_refusals:
      return header_list_refusals_.note(now, amount);
    default:
      return true;  // not a rate: bounded where it is checked
  }
}

}  // namespace zn::h2
