// What the agent sends back on its transport (issue 15): frames of
// kind u8 | length u32 (big-endian) | payload. Output streams as it comes;
// one result or one rejection ends the exchange. An exchange is one
// envelope: on TCP one connection, on a virtio-serial port one connection
// of zerod's to the VM's socket for the port.
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
  // The envelope verified and was admitted: the command starts. The first
  // frame of every verified exchange, so zerod learns within a bound that an
  // agent is there (a virtio-serial socket accepts whether one is or not).
  kAccepted = 6,
};

inline constexpr size_t kFrameHeaderSize = 5;

// On a virtio-serial channel the agent opens its reply with this, then the
// envelope's nonce: bytes an earlier exchange left in QEMU's buffers (the
// guest cannot tell one host connection from the next) come before it, and
// zerod skips them. Only the agent, having read the envelope, can write a
// nonce zerod has just chosen.
inline constexpr std::string_view kReplySync = "ZN-REPLY";

// And zerod, to cancel a command on a channel it abandons (its client went
// away), sends this byte: on a channel, any byte after the envelope, or the
// host side closing, ends the command.
inline constexpr char kCancelByte = 0x18;
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
