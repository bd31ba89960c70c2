// libFuzzer target: arbitrary bytes as WebSocket frames from a client and
// from a server (zn::websocket::FrameReader, what the proxy's relay reads
// each side with).
//
// Build and run: as client_hello_fuzz.cpp says, with --target
// websocket_frame_fuzz and corpus fuzz/corpus/websocket_frame.
//
// Besides "no crash / no sanitizer report", it checks what the relay relies
// on: the verdict and the pieces do not depend on how the bytes were split
// across reads; what is handed on re-frames (frame()) into bytes the reader
// reads back to the same messages; no message is longer than the bound.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/websocket/frame.h"

namespace {

using namespace zn::websocket;

constexpr uint64_t kMaxMessage = 4096;

struct Read {
  std::string messages;  // every piece, tagged, in order
  uint16_t error = 0;
};

// The pieces as one comparable string: data joined per message.
void describe(const std::vector<Piece>& pieces, std::string& out, uint64_t& in_message) {
  for (const Piece& p : pieces) {
    if (p.kind == Piece::Kind::kControl) {
      out += "C" + std::to_string(static_cast<int>(p.opcode)) + ":" + p.payload + "|";
      continue;
    }
    if (p.message_start) {
      out += "M" + std::to_string(static_cast<int>(p.opcode)) + ":";
      in_message = 0;
    }
    in_message += p.payload.size();
    if (in_message > kMaxMessage) __builtin_trap();
    out += p.payload;
    if (p.message_end) out += "|";
  }
}

Read read(std::string_view in, Sender sender, size_t step) {
  FrameReader reader(sender, kMaxMessage);
  Read r;
  std::string buffered;
  std::vector<Piece> pieces;
  uint64_t in_message = 0;
  size_t at = 0;
  while (at < in.size()) {
    const size_t n = step == 0 ? in.size() : std::min(step, in.size() - at);
    buffered.append(in.substr(at, n));
    at += n;
    pieces.clear();
    FrameReader::Step s = reader.feed(buffered, pieces);
    if (s.consumed > buffered.size()) __builtin_trap();
    buffered.erase(0, s.consumed);
    describe(pieces, r.messages, in_message);
    if (s.error != nullptr) {
      r.error = s.error_code;
      break;
    }
  }
  return r;
}

// What the relay would send on: every piece re-framed (server frames, so
// they read back with Sender::kServer).
std::string reframe(std::string_view in, Sender sender) {
  FrameReader reader(sender, kMaxMessage);
  std::vector<Piece> pieces;
  FrameReader::Step s = reader.feed(in, pieces);
  (void)s;
  std::string out;
  bool first = true;
  Opcode opcode = Opcode::kBinary;
  for (const Piece& p : pieces) {
    if (p.kind == Piece::Kind::kControl) {
      out += frame(true, p.opcode, p.payload, nullptr);
      continue;
    }
    if (p.message_start) {
      first = true;
      opcode = p.opcode;
    }
    out += frame(p.message_end, first ? opcode : Opcode::kContinuation, p.payload, nullptr);
    first = false;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  for (Sender sender : {Sender::kClient, Sender::kServer}) {
    const Read whole = read(in, sender, 0);
    if (size <= 512) {
      for (size_t step : {1, 3, 7}) {
        const Read split = read(in, sender, step);
        if (split.messages != whole.messages || split.error != whole.error) __builtin_trap();
      }
    }
    // Re-framed, the complete messages and control frames read back the same.
    const std::string again = reframe(in, sender);
    const Read back = read(again, Sender::kServer, 0);
    if (back.error != 0) __builtin_trap();
    if (whole.messages.compare(0, back.messages.size(), back.messages) != 0) __builtin_trap();
  }
  return 0;
}
