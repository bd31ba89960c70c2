#include "raw_frames.h"

namespace zn::h2::test {

namespace {

void put32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t get32(std::string_view s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) | (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | static_cast<uint8_t>(s[at + 3]);
}

// RFC 7541 5.1 with a 7-bit prefix and the H bit clear.
void put_string(std::string& s, std::string_view str) {
  size_t n = str.size();
  if (n < 127) {
    s.push_back(static_cast<char>(n));
  } else {
    s.push_back(static_cast<char>(127));
    n -= 127;
    while (n >= 128) {
      s.push_back(static_cast<char>((n % 128) + 128));
      n /= 128;
    }
    s.push_back(static_cast<char>(n));
  }
  s.append(str);
}

}  // namespace

std::string client_preface() { return "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"; }

std::string frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload) {
  std::string f;
  const size_t n = payload.size();
  f.push_back(static_cast<char>((n >> 16) & 0xff));
  f.push_back(static_cast<char>((n >> 8) & 0xff));
  f.push_back(static_cast<char>(n & 0xff));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  put32(f, stream_id);
  f.append(payload);
  return f;
}

std::string settings(const std::vector<std::pair<uint16_t, uint32_t>>& entries) {
  std::string p;
  for (auto [id, value] : entries) {
    p.push_back(static_cast<char>(id >> 8));
    p.push_back(static_cast<char>(id & 0xff));
    put32(p, value);
  }
  return frame(kSettings, 0, 0, p);
}

std::string settings_ack() { return frame(kSettings, kAck, 0, ""); }

std::string ping(uint64_t opaque) {
  std::string p;
  put32(p, static_cast<uint32_t>(opaque >> 32));
  put32(p, static_cast<uint32_t>(opaque));
  return frame(kPing, 0, 0, p);
}

std::string rst_stream(uint32_t stream_id, uint32_t error_code) {
  std::string p;
  put32(p, error_code);
  return frame(kRstStream, 0, stream_id, p);
}

std::string window_update(uint32_t stream_id, uint32_t increment) {
  std::string p;
  put32(p, increment);
  return frame(kWindowUpdate, 0, stream_id, p);
}

std::string data(uint32_t stream_id, std::string_view bytes, uint8_t flags) {
  return frame(kData, flags, stream_id, bytes);
}

std::string priority(uint32_t stream_id, uint32_t depends_on, bool exclusive, uint8_t weight) {
  std::string p;
  put32(p, depends_on | (exclusive ? 0x80000000u : 0));
  p.push_back(static_cast<char>(weight));
  return frame(kPriority, 0, stream_id, p);
}

std::string hpack_literals(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string block;
  for (const auto& [name, value] : fields) {
    block.push_back(0x10);  // literal never indexed, new name
    put_string(block, name);
    put_string(block, value);
  }
  return block;
}

std::string hpack_indexed_literal(const std::string& name, const std::string& value) {
  std::string block(1, '\x40');
  put_string(block, name);
  put_string(block, value);
  return block;
}

std::string header_block(uint32_t stream_id, std::string_view block, uint8_t flags, size_t piece) {
  std::string out;
  size_t at = 0;
  do {
    const std::string_view part = block.substr(at, piece);
    const bool first = at == 0, last = at + part.size() >= block.size();
    out += frame(first ? kHeaders : kContinuation,
                 static_cast<uint8_t>((first ? flags : 0) | (last ? kEndHeaders : 0)), stream_id, part);
    at += part.size();
  } while (at < block.size());
  return out;
}

std::string headers(uint32_t stream_id, std::string_view block, uint8_t flags) {
  return frame(kHeaders, flags, stream_id, block);
}

std::string get_block(std::string_view path) {
  return hpack_literals({{":method", "GET"},
                         {":scheme", "https"},
                         {":authority", "example.com"},
                         {":path", std::string(path)}});
}

uint32_t Frame::error_code() const {
  if (type == kRstStream && payload.size() >= 4) return get32(payload, 0);
  if (type == kGoaway && payload.size() >= 8) return get32(payload, 4);
  return 0xffffffffu;
}

std::vector<Frame> parse_frames(std::string_view bytes) {
  std::vector<Frame> frames;
  size_t at = 0;
  while (bytes.size() - at >= 9) {
    const size_t n = (size_t{static_cast<uint8_t>(bytes[at])} << 16) |
                     (size_t{static_cast<uint8_t>(bytes[at + 1])} << 8) | static_cast<uint8_t>(bytes[at + 2]);
    if (bytes.size() - at - 9 < n) break;
    Frame f;
    f.type = static_cast<uint8_t>(bytes[at + 3]);
    f.flags = static_cast<uint8_t>(bytes[at + 4]);
    f.stream_id = get32(bytes, at + 5) & 0x7fffffffu;
    f.payload = std::string(bytes.substr(at + 9, n));
    frames.push_back(std::move(f));
    at += 9 + n;
  }
  return frames;
}

int64_t goaway_code(const std::vector<Frame>& frames) {
  for (const Frame& f : frames)
    if (f.type == kGoaway) return f.error_code();
  return -1;
}

int64_t rst_code(const std::vector<Frame>& frames, uint32_t stream_id) {
  for (const Frame& f : frames)
    if (f.type == kRstStream && f.stream_id == stream_id) return f.error_code();
  return -1;
}

}  // namespace zn::h2::test
