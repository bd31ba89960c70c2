// What the agent sends back on its transport (issue 15): frames of
// kind u8 | length u32 (big-endian) | payload. Output streams as it comes;
// one result or one rejection ends the exchange.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zn::command {

enum class FrameKind : uint8_t {
  kStdout = 1,
  kStderr = 2,
  kResult = 3,  // JSON: {"exit_code"|"signal", "duration_ms", ...}
  kReject = 4,  // JSON: {"reason": rejection_name, "detail"?}
  kData = 5,    // a file's bytes (get)
};

inline constexpr size_t kFrameHeaderSize = 5;
inline constexpr uint32_t kMaxFramePayload = 1 << 20;

std::string frame(FrameKind kind, std::string_view payload);

struct Frame {
  FrameKind kind = FrameKind::kStdout;
  std::string payload;
};
// The first complete frame at the front of `buf` (removed from it), or
// nullopt when more bytes are needed. Throws std::runtime_error on an
// unknown kind or a payload over kMaxFramePayload.
std::optional<Frame> take_frame(std::string& buf);

}  // namespace zn::command
