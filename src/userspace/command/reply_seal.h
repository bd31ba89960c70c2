// The agent's replies, authenticated (issue 15): the envelope proves a
// command came from zerod; this proves the reply came from the agent that
// was provisioned for the session, and belongs to that one command.
//
// Without it a reply is authenticated only by the transport: a guest
// process that listened on the agent port before the agent (or after it
// died) could answer zerod with made-up output and exit codes. The agent
// holds a per-session result key (zerod derives it; it is delivered to the
// agent privately, never to the sandbox's workload) and every frame it sends
// ends in a 32-byte tag:
//
//   HMAC-SHA-256(result key, "zeroness/reply/v1" | nonce | seq u64 | kind u8 | payload)
//
// The nonce is the command envelope's, so a reply cannot be replayed for
// another command; seq counts the frames from 0, so none can be dropped,
// repeated or reordered; the last frame (a result or a rejection) ends the
// reply, so a cut is seen too.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/command/envelope.h"
#include "userspace/command/frames.h"

namespace zn::command {

inline constexpr size_t kResultKeySize = 32;
inline constexpr size_t kReplyTagSize = 32;
using ResultKey = std::array<unsigned char, kResultKeySize>;

// The agent's side: seals frames in order.
class ReplySealer {
 public:
  ReplySealer(const ResultKey& key, const Nonce& nonce) : key_(key), nonce_(nonce) {}
  // A whole frame whose payload is `payload` followed by its tag.
  std::string seal(FrameKind kind, std::string_view payload);

 private:
  ResultKey key_;
  Nonce nonce_;
  uint64_t seq_ = 0;
};

// zerod's side: opens frames in order. open() strips the tag from a frame
// taken off the wire; false (the frame untouched) when it is not the next
// frame the agent sealed for this command under this key.
class ReplyOpener {
 public:
  ReplyOpener(const ResultKey& key, const Nonce& nonce) : key_(key), nonce_(nonce) {}
  bool open(Frame& frame);

 private:
  ResultKey key_;
  Nonce nonce_;
  uint64_t seq_ = 0;
};

// The tag itself (both sides, and tests).
std::array<unsigned char, kReplyTagSize> reply_tag(const ResultKey& key, const Nonce& nonce, uint64_t seq,
                                                   FrameKind kind, std::string_view payload);

// Hex (64 digits) to a key and back, for configuration files.
bool parse_result_key(std::string_view hex, ResultKey& out);
std::string result_key_hex(const ResultKey& key);

}  // namespace zn::command
