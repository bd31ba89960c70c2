#include "userspace/http/body.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace zn::http {
namespace {

// 16 hex digits is every uint64_t; a longer size (even with leading zeros) is
// refused so that no implementation can wrap it around.
constexpr size_t kMaxChunkSizeDigits = 16;

// qdtext / quoted-pair octets (RFC 9110 5.6.4), excluding DQUOTE and '\'.
bool is_qdtext(unsigned char c) {
  return c == '\t' || c == ' ' || c == 0x21 || (c >= 0x23 && c != 0x5c && c != 0x7f);
}

bool is_quoted_pair_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

size_t token_length(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && is_tchar(static_cast<unsigned char>(s[n]))) ++n;
  return n;
}

// Length of the quoted-string at the start of s (s[0] == '"'), or 0 if it is
// unterminated or holds a CTL.
size_t quoted_string_length(std::string_view s) {
  for (size_t i = 1; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') return i + 1;
    if (c == '\\') {
      if (++i == s.size() || !is_quoted_pair_char(static_cast<unsigned char>(s[i]))) return 0;
    } else if (!is_qdtext(c)) {
      return 0;
    }
  }
  return 0;
}

// *( ";" token [ "=" ( token / quoted-string ) ] ), with no whitespace: RFC
// 9112 7.1.1 tolerates BWS around ';' and '=', but no client needs it and a
// lenient reading is one more place for two parsers to disagree.
bool valid_chunk_extensions(std::string_view s) {
  while (!s.empty()) {
    if (s[0] != ';') return false;
    s.remove_prefix(1);
    const size_t name = token_length(s);
    if (name == 0) return false;
    s.remove_prefix(name);
    if (s.empty() || s[0] != '=') continue;
    s.remove_prefix(1);
    const size_t value = (!s.empty() && s[0] == '"') ? quoted_string_length(s) : token_length(s);
    if (value == 0) return false;
    s.remove_prefix(value);
  }
  return true;
}

}  // namespace

BodyDecoder::BodyDecoder(BodyFraming framing, uint64_t content_length, const HttpLimits& limits)
    : limits_(limits) {
  switch (framing) {
    case BodyFraming::kNone:
      state_ = State::kDone;
      break;
    case BodyFraming::kContentLength:
      remaining_ = content_length;
      state_ = content_length == 0 ? State::kDone : State::kData;
      break;
    case BodyFraming::kChunked:
      chunked_ = true;
      state_ = State::kSizeLine;
      break;
    case BodyFraming::kUntilClose:
      state_ = State::kUntilClose;
      break;
  }
}

void BodyDecoder::fail(const char* reason) {
  state_ = State::kError;
  error_ = reason;
}

// line_ holds the chunk-size line with its CR (the LF was just read).
bool BodyDecoder::end_size_line() {
  if (line_.empty() || line_.back() != '\r') {
    fail("bare LF in chunk-size line");
    return false;
  }
  const std::string_view content(line_.data(), line_.size() - 1);
  size_t digits = 0;
  uint64_t size = 0;
  while (digits < content.size() && hex_value(content[digits]) >= 0) {
    if (digits == kMaxChunkSizeDigits) {
      fail("chunk size too long");
      return false;
    }
    size = size << 4 | static_cast<uint64_t>(hex_value(content[digits]));
    ++digits;
  }
  if (digits == 0) {
    fail("invalid chunk size");
    return false;
  }
  if (!valid_chunk_extensions(content.substr(digits))) {
    fail("invalid chunk extension");
    return false;
  }
  line_.clear();
  if (size == 0) {
    state_ = State::kTrailer;
  } else {
    remaining_ = size;
    state_ = State::kData;
  }
  return true;
}

// line_ holds one trailer line with its CR (the LF was just read). Trailer
// fields are checked for syntax and kept for the caller: the proxy forwards
// none of a guest's, so none can smuggle a late Content-Length or credential
// past policy; an upstream's go on filtered and scrubbed.
bool BodyDecoder::end_trailer_line() {
  if (line_.empty() || line_.back() != '\r') {
    fail("bare LF in trailer section");
    return false;
  }
  const std::string_view content(line_.data(), line_.size() - 1);
  if (content.empty()) {
    state_ = State::kDone;
    return true;
  }
  Header field;
  if (const char* why = parse_field_line(content, field)) {
    fail(why);
    return false;
  }
  trailers_.push_back(std::move(field));
  line_.clear();
  return true;
}

std::string last_chunk(const std::vector<Header>& trailers) {
  std::string out = "0\r\n";
  for (const Header& h : trailers) out.append(h.name).append(": ").append(h.value).append("\r\n");
  return out.append("\r\n");
}

BodyDecoder::Step BodyDecoder::feed(std::string_view in, std::string& out) {
  size_t pos = 0;
  while (pos < in.size() && state_ != State::kDone && state_ != State::kError) {
    switch (state_) {
      case State::kUntilClose:
        out.append(in.substr(pos));
        pos = in.size();
        break;
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size() - pos));
        out.append(in.substr(pos, n));
        pos += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = chunked_ ? State::kDataCr : State::kDone;
        break;
      }
      case State::kDataCr:
      case State::kDataLf: {
        const bool cr = state_ == State::kDataCr;
        if (in[pos] != (cr ? '\r' : '\n')) {
          fail("chunk data not followed by CRLF");
          break;
        }
        ++pos;
        state_ = cr ? State::kDataLf : State::kSizeLine;
        break;
      }
      case State::kSizeLine: {
        const char c = in[pos++];
        if (c == '\n') {
          end_size_line();
        } else if (!line_.empty() && line_.back() == '\r') {
          fail("bare CR in chunk-size line");
        } else if (line_.size() > limits_.max_chunk_line ||
                   (line_.size() == limits_.max_chunk_line && c != '\r')) {
          fail("chunk-size line too long");
        } else {
          line_.push_back(c);
        }
        break;
      }
      case State::kTrailer: {
        const char c = in[pos++];
        if (++trailer_bytes_ > limits_.max_trailer_bytes) {
          fail("trailer section too large");
        } else if (c == '\n') {
          end_trailer_line();
        } else if (!line_.empty() && line_.back() == '\r') {
          fail("bare CR in trailer section");
        } else {
          line_.push_back(c);
        }
        break;
      }
      case State::kDone:
      case State::kError:
        break;
    }
  }
  Step step;
  step.consumed = pos;
  step.done = state_ == State::kDone;
  step.error = state_ == State::kError;
  if (step.error) step.error_reason = error_;
  return step;
}

std::string chunk_frame(std::string_view data) {
  if (data.empty()) return {};
  std::array<char, 16> hex{};
  const auto res = std::to_chars(hex.data(), hex.data() + hex.size(), data.size(), 16);
  std::string frame;
  frame.reserve(static_cast<size_t>(res.ptr - hex.data()) + data.size() + 4);
  frame.append(hex.data(), res.ptr);
  frame.append("\r\n");
  frame.append(data);
  frame.append("\r\n");
  return frame;
}

}  // namespace zn::http
