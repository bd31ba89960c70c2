#include "userspace/websocket/frame.h"

#include <algorithm>

namespace zn::websocket {
namespace {

uint8_t byte_at(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

bool known_opcode(uint8_t op) { return op <= 0x2 || (op >= 0x8 && op <= 0xA); }

}  // namespace

FrameReader::Step FrameReader::feed(std::string_view in, std::vector<Piece>& out) {
  Step s;
  if (failed_) return fail(s, kCloseProtocolError, "read after an error");
  while (s.consumed < in.size()) {
    const std::string_view rest = in.substr(s.consumed);
    if (!in_frame_) {
      if (closed_) return fail(s, kCloseProtocolError, "a frame after the Close frame");
      if (rest.size() < 2) break;
      const uint8_t b0 = byte_at(rest, 0), b1 = byte_at(rest, 1);
      if ((b0 & 0x70) != 0)
        return fail(s, kCloseProtocolError, "reserved bits set (no extension was negotiated)");
      const uint8_t op = b0 & 0x0F;
      if (!known_opcode(op)) return fail(s, kCloseProtocolError, "unknown opcode");
      const bool fin = (b0 & 0x80) != 0;
      const bool masked = (b1 & 0x80) != 0;
      if (masked != (sender_ == Sender::kClient))
        return fail(s, kCloseProtocolError,
                    sender_ == Sender::kClient ? "an unmasked frame from the client"
                                               : "a masked frame from the server");
      uint64_t length = b1 & 0x7F;
      size_t header = 2 + (length == 126 ? 2 : length == 127 ? 8 : 0) + (masked ? 4 : 0);
      if (rest.size() < header) break;
      size_t at = 2;
      if (length == 126) {
        length = (uint64_t{byte_at(rest, 2)} << 8) | byte_at(rest, 3);
        at = 4;
      } else if (length == 127) {
        length = 0;
        for (size_t i = 0; i < 8; ++i) length = (length << 8) | byte_at(rest, 2 + i);
        at = 10;
        if ((length >> 63) != 0) return fail(s, kCloseProtocolError, "a frame length over 2^63");
      }
      const auto opcode = static_cast<Opcode>(op);
      if (is_control(opcode)) {
        if (!fin) return fail(s, kCloseProtocolError, "a fragmented control frame");
        if (length > 125) return fail(s, kCloseProtocolError, "a control frame over 125 bytes");
        if (opcode == Opcode::kClose && length == 1)
          return fail(s, kCloseProtocolError, "a Close frame of 1 byte");
      } else if (opcode == Opcode::kContinuation) {
        if (!in_message_) return fail(s, kCloseProtocolError, "a continuation frame outside a message");
      } else if (in_message_) {
        return fail(s, kCloseProtocolError, "a new message inside a fragmented one");
      }
      if (!is_control(opcode)) {
        const uint64_t before = opcode == Opcode::kContinuation ? message_bytes_ : 0;
        if (length > max_message_ || before + length > max_message_)
          return fail(s, kCloseMessageTooBig, "a message over the size limit");
        if (opcode != Opcode::kContinuation) {
          in_message_ = true;
          message_opcode_ = opcode;
          message_bytes_ = 0;
          message_started_ = false;
        }
        message_bytes_ += length;
      } else {
        control_.clear();
      }
      if (masked) std::copy(rest.begin() + at, rest.begin() + at + 4, mask_);
      masked_ = masked;
      mask_offset_ = 0;
      fin_ = fin;
      opcode_ = opcode;
      left_ = length;
      in_frame_ = true;
      s.consumed += header;
    }
    // The frame's payload, as much of it as is here (a zero-length frame
    // ends at once).
    const size_t take = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - s.consumed));
    const std::string_view bytes = in.substr(s.consumed, take);
    s.consumed += take;
    left_ -= take;
    if (is_control(opcode_)) {
      const size_t at = control_.size();
      control_.append(bytes);
      if (masked_) apply_mask(control_.data() + at, take, mask_, mask_offset_);
      mask_offset_ += take;
      if (left_ != 0) continue;
      in_frame_ = false;
      if (opcode_ == Opcode::kClose) closed_ = true;
      Piece piece;
      piece.kind = Piece::Kind::kControl;
      piece.opcode = opcode_;
      piece.payload = std::move(control_);
      control_.clear();
      out.push_back(std::move(piece));
      continue;
    }
    const bool frame_done = left_ == 0;
    const bool message_done = frame_done && fin_;
    if (take > 0 || message_done) {
      Piece piece;
      piece.kind = Piece::Kind::kData;
      piece.opcode = message_opcode_;
      piece.message_start = !message_started_;
      piece.message_end = message_done;
      piece.payload.assign(bytes);
      if (masked_) apply_mask(piece.payload.data(), take, mask_, mask_offset_);
      mask_offset_ += take;
      message_started_ = true;
      out.push_back(std::move(piece));
    }
    if (frame_done) {
      in_frame_ = false;
      if (fin_) in_message_ = false;
    }
  }
  return s;
}

std::string frame_header(bool fin, Opcode opcode, uint64_t length, const uint8_t* mask) {
  std::string h;
  h.reserve(14);
  h.push_back(static_cast<char>((fin ? 0x80 : 0) | static_cast<uint8_t>(opcode)));
  const uint8_t mask_bit = mask != nullptr ? 0x80 : 0;
  if (length < 126) {
    h.push_back(static_cast<char>(mask_bit | length));
  } else if (length <= 0xFFFF) {
    h.push_back(static_cast<char>(mask_bit | 126));
    h.push_back(static_cast<char>(length >> 8));
    h.push_back(static_cast<char>(length & 0xFF));
  } else {
    h.push_back(static_cast<char>(mask_bit | 127));
    for (int shift = 56; shift >= 0; shift -= 8) h.push_back(static_cast<char>((length >> shift) & 0xFF));
  }
  if (mask != nullptr) h.append(reinterpret_cast<const char*>(mask), 4);
  return h;
}

void apply_mask(char* data, size_t size, const uint8_t mask[4], uint64_t offset) {
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<char>(data[i] ^ mask[(offset + i) & 3]);
}

std::string frame(bool fin, Opcode opcode, std::string_view payload, const uint8_t* mask) {
  std::string out = frame_header(fin, opcode, payload.size(), mask);
  const size_t at = out.size();
  out.append(payload);
  if (mask != nullptr) apply_mask(out.data() + at, payload.size(), mask, 0);
  return out;
}

std::string close_payload(uint16_t code, std::string_view reason) {
  std::string out;
  out.push_back(static_cast<char>(code >> 8));
  out.push_back(static_cast<char>(code & 0xFF));
  out.append(reason.substr(0, 123));
  return out;
}

}  // namespace zn::websocket
