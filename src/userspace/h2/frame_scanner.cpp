#include "userspace/h2/frame_scanner.h"

#include <algorithm>

namespace zn::h2 {

namespace {

uint32_t read31(const uint8_t* p) {
  return ((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3]) & 0x7fffffffu;
}

}  // namespace

bool FrameScanner::scan(std::span<const uint8_t> bytes, const Visit& visit, const VisitPriority& priority) {
  size_t at = 0;
  while (!stopped_ && at < bytes.size()) {
    if (want_ > 0) {
      // A PRIORITY payload, read rather than skipped.
      const size_t n = std::min(want_ - got_, bytes.size() - at);
      std::copy_n(bytes.data() + at, n, payload_ + got_);
      got_ += n;
      at += n;
      if (got_ < want_) break;
      want_ = 0;
      PriorityFields p;
      p.stream_id = priority_stream_;
      p.depends_on = read31(payload_);
      p.exclusive = payload_[0] & 0x80;
      p.weight = payload_[4];
      if (priority && !priority(p)) stopped_ = true;
      continue;
    }
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
    head.stream_id = read31(head_ + 5);
    if (!visit(head, at)) {
      stopped_ = true;
      break;
    }
    if (head.type == kPriorityFrame && head.length == kPriorityPayloadBytes) {
      priority_stream_ = head.stream_id;
      want_ = kPriorityPayloadBytes;
      got_ = 0;
    } else {
      skip_ = head.length;
    }
  }
  return !stopped_;
}

}  // namespace zn::h2
