// Reads the frame headers of an HTTP/2 byte stream ahead of nghttp2, for
// the bounds nghttp2 enforces without saying why it closed the connection
// (a frame over SETTINGS_MAX_FRAME_SIZE, a SETTINGS frame with too many
// entries): the proxy must count and audit those.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace zn::h2 {

struct FrameHead {
  uint32_t length = 0;  // payload bytes
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream_id = 0;
};

class FrameScanner {
 public:
  // preface_bytes: what precedes the first frame (the client's 24-byte
  // connection preface, on the server side; 0 on the client side).
  explicit FrameScanner(size_t preface_bytes) : skip_(preface_bytes) {}

  // Calls `visit` for each frame header completed in `bytes` (headers may
  // be split across calls). A visit returning false stops the scan for
  // good; so does this returning false.
  bool scan(std::span<const uint8_t> bytes, const std::function<bool(const FrameHead&)>& visit);

 private:
  uint64_t skip_;  // preface or payload bytes still to pass over
  uint8_t head_[9] = {};
  size_t have_ = 0;
  bool stopped_ = false;
};

}  // namespace zn::h2
