// WebSocket framing (RFC 6455 section 5) for the intercepting proxy's relay
// (issue 17): the frames of one direction read incrementally into message
// pieces, and frames written anew. The proxy never forwards a peer's frame
// as it came: it reads the payload (unmasked), screens or scrubs it, and
// frames what goes on itself, so nothing but payload crosses, and a frame the
// reader does not accept whole is never passed on.
//
// No extension is ever negotiated through the proxy (it strips
// Sec-WebSocket-Extensions), so every RSV bit must be zero and a payload is
// the message's own bytes (never compressed: scannable).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zn::websocket {

enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

inline bool is_control(Opcode op) { return (static_cast<uint8_t>(op) & 0x8) != 0; }

// Close codes (RFC 6455 7.4.1) the proxy sends.
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseGoingAway = 1001;
inline constexpr uint16_t kCloseProtocolError = 1002;
inline constexpr uint16_t kClosePolicyViolation = 1008;
inline constexpr uint16_t kCloseMessageTooBig = 1009;

// Who sent the frames being read: a client masks every frame, a server none
// (RFC 6455 5.1); the other way is a protocol error.
enum class Sender { kClient, kServer };

// What the reader hands on, in order. Data payload comes as it arrives (a
// frame of a megabyte is not held whole); a control frame's payload (at most
// 125 bytes) whole.
struct Piece {
  enum class Kind { kData, kControl };
  Kind kind = Kind::kData;
  // kData: the message's opcode (kText or kBinary, also on the pieces of
  // its continuation frames); kControl: kClose, kPing or kPong.
  Opcode opcode = Opcode::kBinary;
  bool message_start = false;  // kData: the first piece of a message
  bool message_end = false;    // kData: the last piece (its final frame read whole)
  std::string payload;         // unmasked
};

class FrameReader {
 public:
  // `max_message`: the most payload bytes one message (all its frames) may
  // carry; past it the reader fails with kCloseMessageTooBig.
  FrameReader(Sender sender, uint64_t max_message) : sender_(sender), max_message_(max_message) {}

  struct Step {
    size_t consumed = 0;
    // Set when the input is not a valid frame sequence: the close code to
    // answer with and a short reason (never payload). The reader is then
    // done; nothing after the error is read.
    uint16_t error_code = 0;
    const char* error = nullptr;
  };
  // Reads what it can of `in` (a header is taken only whole), appending the
  // pieces to `out`. A complete step consumes all of `in` except an
  // incomplete header at its end.
  Step feed(std::string_view in, std::vector<Piece>& out);

  // A Close frame was read: anything after it is a protocol error.
  bool closed() const { return closed_; }
  bool in_message() const { return in_message_; }

 private:
  Step fail(Step s, uint16_t code, const char* why) {
    failed_ = true;
    s.error_code = code;
    s.error = why;
    return s;
  }

  Sender sender_;
  uint64_t max_message_;
  bool failed_ = false;
  bool closed_ = false;
  // The frame being read.
  bool in_frame_ = false;
  bool fin_ = false;
  Opcode opcode_ = Opcode::kContinuation;
  uint64_t left_ = 0;  // payload bytes of the frame still to come
  uint8_t mask_[4] = {0, 0, 0, 0};
  bool masked_ = false;
  uint64_t mask_offset_ = 0;
  bool frame_started_piece_ = false;  // a piece of this frame was handed on
  std::string control_;               // a control frame's payload so far
  // The message being read (data frames).
  bool in_message_ = false;
  Opcode message_opcode_ = Opcode::kBinary;
  uint64_t message_bytes_ = 0;
  bool message_started_ = false;  // its first piece was handed on
};

// A frame header for `length` payload bytes. `mask`: the 4-byte masking key
// a client's frame carries, or null for a server's frame.
std::string frame_header(bool fin, Opcode opcode, uint64_t length, const uint8_t* mask);

// XORs `data` with the masking key, the key's position continuing at
// `offset` (RFC 6455 5.3). Masking and unmasking are the same operation.
void apply_mask(char* data, size_t size, const uint8_t mask[4], uint64_t offset);

// A whole frame: header then payload (masked when `mask` is given).
std::string frame(bool fin, Opcode opcode, std::string_view payload, const uint8_t* mask);

// A Close frame's payload: the code, then a reason (at most 123 bytes,
// UTF-8; the proxy's reasons are ASCII).
std::string close_payload(uint16_t code, std::string_view reason);

}  // namespace zn::websocket
