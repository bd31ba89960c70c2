// A stream's body bytes not yet written (session_core.h), as chunks of at
// most kChunk bytes: what a stream holds costs about what it holds, and
// what is written is freed a chunk at a time. One std::string grown by
// appends kept up to twice its size allocated (a stream held back at
// 272 KB of a 256 KiB bound had 512 KiB: issue 32), and erasing each
// written frame from its front copied the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace zn::h2 {

class BodyBuffer {
 public:
  // A DATA frame's payload at most (SETTINGS_MAX_FRAME_SIZE's default).
  static constexpr size_t kChunk = 16384;

  void append(std::string_view bytes);
  // Copies up to `n` bytes from the front to `out` and drops them; how many.
  size_t take(uint8_t* out, size_t n);
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::deque<std::string> chunks_;  // each at most kChunk bytes
  size_t taken_ = 0;                // of chunks_.front()
  size_t size_ = 0;
};

}  // namespace zn::h2
