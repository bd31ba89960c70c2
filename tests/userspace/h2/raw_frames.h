// Hand-built HTTP/2 frames for the hostile cases a well-behaved nghttp2
// peer would never send, and a reader for the frames a session writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zn::h2::test {

inline constexpr uint8_t kData = 0x0, kHeaders = 0x1, kPriority = 0x2, kRstStream = 0x3, kSettings = 0x4,
                         kPing = 0x6, kGoaway = 0x7, kWindowUpdate = 0x8, kContinuation = 0x9;
inline constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;

std::string client_preface();  // the magic only; follow with settings()
std::string frame(uint8_t type, uint8_t flags, uint32_t stream_id, std::string_view payload);
std::string settings(const std::vector<std::pair<uint16_t, uint32_t>>& entries = {});
std::string settings_ack();
std::string ping(uint64_t opaque = 0);
std::string rst_stream(uint32_t stream_id, uint32_t error_code);
std::string window_update(uint32_t stream_id, uint32_t increment);
std::string data(uint32_t stream_id, std::string_view bytes, uint8_t flags = 0);
// RFC 9113 6.3: stream dependency (E bit when exclusive) and weight.
std::string priority(uint32_t stream_id, uint32_t depends_on, bool exclusive = false, uint8_t weight = 15);
// A header block of literal fields (HPACK 6.2.2, never indexed, no Huffman):
// any name, upper case and duplicates included.
std::string hpack_literals(const std::vector<std::pair<std::string, std::string>>& fields);
// A literal field with incremental indexing (HPACK 6.2.1, new name): it
// enters the dynamic table, where the next entry is index 62.
std::string hpack_indexed_literal(const std::string& name, const std::string& value);
// A header block split into HEADERS + CONTINUATIONs of at most `piece`
// bytes; `flags` (END_STREAM) go on the HEADERS, END_HEADERS on the last.
std::string header_block(uint32_t stream_id, std::string_view block, uint8_t flags, size_t piece = 16384);
std::string headers(uint32_t stream_id, std::string_view block, uint8_t flags);
// A GET for https://example.com/ as a complete block.
std::string get_block(std::string_view path = "/");

struct Frame {
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t stream_id = 0;
  std::string payload;
  // RST_STREAM's code, or GOAWAY's.
  uint32_t error_code() const;
};

// The complete frames in `bytes` (a server's output has no preface).
std::vector<Frame> parse_frames(std::string_view bytes);
// The first GOAWAY's error code among `frames`, or -1.
int64_t goaway_code(const std::vector<Frame>& frames);
// The RST_STREAM code sent for `stream_id`, or -1.
int64_t rst_code(const std::vector<Frame>& frames, uint32_t stream_id);

}  // namespace zn::h2::test
