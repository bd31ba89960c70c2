// Reads the frame headers of an HTTP/2 byte stream ahead of nghttp2, for
// the bounds nghttp2 enforces without saying why it closed the connection
// (a frame over SETTINGS_MAX_FRAME_SIZE, a SETTINGS frame with too many
// entries): the proxy must count and audit those. It also reads the
// payload of PRIORITY frames, which nghttp2 skips unread once
// SETTINGS_NO_RFC7540_PRIORITIES is on, so that their RFC 9113 6.3 rules
// can still be checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace zn::h2 {

inline constexpr uint8_t kPriorityFrame = 0x2;
inline constexpr uint32_t kPriorityPayloadBytes = 5;  // RFC 9113 6.3

struct FrameHead {
  uint32_t length = 0;  // payload bytes
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream_id = 0;
};

// A PRIORITY frame's payload (RFC 9113 6.3), of a frame of the right length.
struct PriorityFields {
  uint32_t stream_id = 0;   // the frame's stream
  uint32_t depends_on = 0;  // Stream Dependency, without the E bit
  bool exclusive = false;
  uint8_t weight = 0;
};

class FrameScanner {
 public:
  // `head_end`: the offset in the scanned bytes just past the header (its
  // first bytes may have come in an earlier call).
  using Visit = std::function<bool(const FrameHead&, size_t head_end)>;
  using VisitPriority = std::function<bool(const PriorityFields&)>;

  // preface_bytes: what precedes the first frame (the client's 24-byte
  // connection preface, on the server side; 0 on the client side).
  explicit FrameScanner(size_t preface_bytes) : skip_(preface_bytes) {}

  // Calls `visit` for each frame header completed in `bytes`, and
  // `priority` (may be empty) for each 5-byte PRIORITY payload completed
  // (headers and payloads may be split across calls). A visit returning
  // false stops the scan for good; so does this returning false.
  bool scan(std::span<const uint8_t> bytes, const Visit& visit, const VisitPriority& priority = {});

 private:
  uint64_t skip_;  // preface or payload bytes still to pass over
  uint8_t head_[9] = {};
  size_t have_ = 0;
  // The PRIORITY frame whose payload is being read (want_ > 0).
  uint32_t priority_stream_ = 0;
  uint8_t payload_[kPriorityPayloadBytes] = {};
  size_t want_ = 0, got_ = 0;
  bool stopped_ = false;
};

}  // namespace zn::h2
