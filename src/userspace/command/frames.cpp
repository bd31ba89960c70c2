#include "userspace/command/frames.h"

#include <stdexcept>

namespace zn::command {

std::string frame(FrameKind kind, std::string_view payload) {
  if (payload.size() > kMaxFramePayload) throw std::invalid_argument("frame payload too large");
  std::string out;
  out.reserve(kFrameHeaderSize + payload.size());
  out.push_back(static_cast<char>(kind));
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(payload);
  return out;
}

std::optional<Frame> take_frame(std::string& buf) {
  if (buf.size() < kFrameHeaderSize) return std::nullopt;
  const auto kind = static_cast<uint8_t>(buf[0]);
  if (kind < 1 || kind > static_cast<uint8_t>(FrameKind::kAccepted))
    throw std::runtime_error("unknown frame kind " + std::to_string(kind));
  uint32_t n = 0;
  for (int i = 1; i <= 4; ++i) n = n << 8 | static_cast<unsigned char>(buf[i]);
  if (n > kMaxFramePayload) throw std::runtime_error("frame payload over the limit");
  if (buf.size() < kFrameHeaderSize + n) return std::nullopt;
  Frame f{static_cast<FrameKind>(kind), buf.substr(kFrameHeaderSize, n)};
  buf.erase(0, kFrameHeaderSize + n);
  return f;
}

}  // namespace zn::command
