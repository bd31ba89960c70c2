#include "userspace/h2/frame_scanner.h"

#include <algorithm>

namespace zn::h2 {

bool FrameScanner::scan(std::span<const uint8_t> bytes, const std::function<bool(const FrameHead&)>& visit) {
  size_t at = 0;
  while (!stopped_ && at < bytes.size()) {
    if (skip_ > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, bytes.size() - at));
      skip_ -= n;
      at += n;
      continue;
    }
    const size_t n = std::min(sizeof(head_) - have_, bytes.size() - at);
    std::copy_n(bytes.data() + at, n, head_ + have_);
    have_ += n;
    at += n;
    if (have_ < sizeof(head_)) break;
    have_ = 0;
    FrameHead head;
    head.length = (uint32_t{head_[0]} << 16) | (uint32_t{head_[1]} << 8) | head_[2];
    head.type = head_[3];
    head.flags = head_[4];
    head.stream_id =
        ((uint32_t{head_[5]} << 24) | (uint32_t{head_[6]} << 16) | (uint32_t{head_[7]} << 8) | head_[8]) &
        0x7fffffffu;
    if (!visit(head)) stopped_ = true;
    skip_ = head.length;
  }
  return !stopped_;
}

}  // namespace zn::h2
