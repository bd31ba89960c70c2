// The frame reader the WebSocket relay reads both sides with: what it hands
// on (payload only, unmasked, in message pieces) and every frame sequence it
// refuses, at every split of its input.
#include "userspace/websocket/frame.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zn::websocket {
namespace {

const uint8_t kMask[4] = {0x11, 0x22, 0x33, 0x44};

struct Read {
  std::vector<Piece> pieces;
  uint16_t error_code = 0;
  std::string error;
  size_t left = 0;  // bytes not consumed at the end
};

// Feeds `in` in pieces of `step` bytes (0: all at once), as reads would
// deliver it, keeping what the reader did not consume.
Read read_all(const std::string& in, Sender sender, size_t step = 0, uint64_t max_message = 1 << 20) {
  FrameReader reader(sender, max_message);
  Read r;
  std::string buffered;
  size_t at = 0;
  while (at < in.size()) {
    const size_t n = step == 0 ? in.size() : std::min(step, in.size() - at);
    buffered.append(in, at, n);
    at += n;
    FrameReader::Step s = reader.feed(buffered, r.pieces);
    buffered.erase(0, s.consumed);
    if (s.error != nullptr) {
      r.error_code = s.error_code;
      r.error = s.error;
      return r;
    }
  }
  r.left = buffered.size();
  return r;
}

// The messages the pieces make: "text:..." / "binary:..." / "ping:..." etc.
std::vector<std::string> messages(const std::vector<Piece>& pieces) {
  std::vector<std::string> out;
  std::string current;
  for (const Piece& p : pieces) {
    if (p.kind == Piece::Kind::kControl) {
      const char* name = p.opcode == Opcode::kClose  ? "close:"
                         : p.opcode == Opcode::kPing ? "ping:"
                                                     : "pong:";
      out.push_back(name + p.payload);
      continue;
    }
    if (p.message_start) current = p.opcode == Opcode::kText ? "text:" : "binary:";
    current += p.payload;
    if (p.message_end) out.push_back(current);
  }
  return out;
}

TEST(FrameReader, ReadsMaskedClientFramesAtEverySplit) {
  const std::string in = frame(true, Opcode::kText, "hello", kMask) +
                         frame(false, Opcode::kBinary, "ab", kMask) + frame(true, Opcode::kPing, "p", kMask) +
                         frame(false, Opcode::kContinuation, "", kMask) +
                         frame(true, Opcode::kContinuation, "cd", kMask) +
                         frame(true, Opcode::kText, std::string(300, 'x'), kMask) +
                         frame(true, Opcode::kBinary, std::string(70000, 'y'), kMask);
  for (size_t step : {0, 1, 2, 3, 7, 13, 100, 4096}) {
    Read r = read_all(in, Sender::kClient, step);
    ASSERT_EQ(r.error, "") << step;
    EXPECT_EQ(r.left, 0u) << step;
    EXPECT_EQ(messages(r.pieces), (std::vector<std::string>{"text:hello", "ping:p", "binary:abcd",
                                                            "text:" + std::string(300, 'x'),
                                                            "binary:" + std::string(70000, 'y')}))
        << step;
  }
}

TEST(FrameReader, AnEmptyMessageIsOnePiece) {
  Read r = read_all(frame(true, Opcode::kText, "", kMask), Sender::kClient);
  ASSERT_EQ(r.pieces.size(), 1u);
  EXPECT_TRUE(r.pieces[0].message_start);
  EXPECT_TRUE(r.pieces[0].message_end);
  EXPECT_EQ(r.pieces[0].payload, "");
}

TEST(FrameReader, ServerFramesAreUnmasked) {
  Read r = read_all(frame(true, Opcode::kText, "hi", nullptr), Sender::kServer);
  EXPECT_EQ(messages(r.pieces), std::vector<std::string>{"text:hi"});
  EXPECT_EQ(read_all(frame(true, Opcode::kText, "hi", kMask), Sender::kServer).error_code,
            kCloseProtocolError);
  EXPECT_EQ(read_all(frame(true, Opcode::kText, "hi", nullptr), Sender::kClient).error_code,
            kCloseProtocolError);
}

TEST(FrameReader, RefusesWhatNoValidPeerSends) {
  auto with_byte0 = [](uint8_t b0, const std::string& rest) {
    return std::string(1, static_cast<char>(b0)) + rest;
  };
  const std::string masked_hi = frame(true, Opcode::kText, "hi", kMask).substr(1);
  struct Case {
    const char* name;
    std::string in;
    uint16_t code;
  };
  const Case cases[] = {
      {"rsv1", with_byte0(0x80 | 0x40 | 0x1, masked_hi), kCloseProtocolError},
      {"rsv2", with_byte0(0x80 | 0x20 | 0x1, masked_hi), kCloseProtocolError},
      {"rsv3", with_byte0(0x80 | 0x10 | 0x1, masked_hi), kCloseProtocolError},
      {"opcode3", with_byte0(0x80 | 0x3, masked_hi), kCloseProtocolError},
      {"opcode11", with_byte0(0x80 | 0xB, masked_hi), kCloseProtocolError},
      {"orphan continuation", frame(true, Opcode::kContinuation, "x", kMask), kCloseProtocolError},
      {"message inside a message",
       frame(false, Opcode::kText, "a", kMask) + frame(true, Opcode::kText, "b", kMask), kCloseProtocolError},
      {"fragmented ping", frame(false, Opcode::kPing, "a", kMask), kCloseProtocolError},
      {"long ping", frame(true, Opcode::kPing, std::string(126, 'p'), kMask), kCloseProtocolError},
      {"close of one byte", frame(true, Opcode::kClose, "x", kMask), kCloseProtocolError},
      {"frame after close", frame(true, Opcode::kClose, "", kMask) + frame(true, Opcode::kText, "x", kMask),
       kCloseProtocolError},
      {"http", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", kCloseProtocolError},
      {"length over 2^63", std::string("\x82\xff\x80\x00\x00\x00\x00\x00\x00\x00", 10) + std::string(4, '\0'),
       kCloseProtocolError},
  };
  for (const Case& c : cases) {
    for (size_t step : {0, 1}) {
      Read r = read_all(c.in, Sender::kClient, step);
      EXPECT_EQ(r.error_code, c.code) << c.name << " step " << step;
    }
  }
}

TEST(FrameReader, BoundsAMessageAcrossItsFrames) {
  // One frame past the bound is refused at its header, before its payload.
  Read big = read_all(frame_header(true, Opcode::kBinary, 1001, kMask), Sender::kClient, 0, 1000);
  EXPECT_EQ(big.error_code, kCloseMessageTooBig);
  // Exactly the bound passes; fragments adding up past it do not.
  EXPECT_EQ(
      read_all(frame(true, Opcode::kBinary, std::string(1000, 'a'), kMask), Sender::kClient, 0, 1000).error,
      "");
  const std::string split = frame(false, Opcode::kBinary, std::string(600, 'a'), kMask) +
                            frame(true, Opcode::kContinuation, std::string(401, 'b'), kMask);
  EXPECT_EQ(read_all(split, Sender::kClient, 0, 1000).error_code, kCloseMessageTooBig);
  // Control frames between fragments do not count, and a new message
  // starts from zero.
  const std::string two = frame(true, Opcode::kBinary, std::string(1000, 'a'), kMask) +
                          frame(true, Opcode::kPing, std::string(100, 'p'), kMask) +
                          frame(true, Opcode::kBinary, std::string(1000, 'b'), kMask);
  EXPECT_EQ(read_all(two, Sender::kClient, 0, 1000).error, "");
}

TEST(FrameReader, NothingAfterAnErrorIsHandedOn) {
  const std::string in = frame(true, Opcode::kText, "ok", kMask) +
                         frame(true, Opcode::kText, "bad", nullptr) +
                         frame(true, Opcode::kText, "after", kMask);
  Read r = read_all(in, Sender::kClient);
  EXPECT_EQ(r.error_code, kCloseProtocolError);
  EXPECT_EQ(messages(r.pieces), std::vector<std::string>{"text:ok"});
}

TEST(FrameWriter, HeadersUseTheShortestLength) {
  EXPECT_EQ(frame_header(true, Opcode::kText, 125, nullptr), std::string("\x81\x7d", 2));
  EXPECT_EQ(frame_header(true, Opcode::kText, 126, nullptr), std::string("\x81\x7e\x00\x7e", 4));
  EXPECT_EQ(frame_header(false, Opcode::kBinary, 65535, nullptr), std::string("\x02\x7e\xff\xff", 4));
  EXPECT_EQ(frame_header(true, Opcode::kBinary, 65536, nullptr),
            std::string("\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10));
  const std::string masked = frame_header(true, Opcode::kPing, 0, kMask);
  EXPECT_EQ(masked, std::string("\x89\x80\x11\x22\x33\x44", 6));
}

TEST(FrameWriter, MaskingContinuesAcrossPieces) {
  std::string a = "abcdefg";
  apply_mask(a.data(), 3, kMask, 0);
  apply_mask(a.data() + 3, 4, kMask, 3);
  std::string b = "abcdefg";
  apply_mask(b.data(), b.size(), kMask, 0);
  EXPECT_EQ(a, b);
  apply_mask(b.data(), b.size(), kMask, 0);
  EXPECT_EQ(b, "abcdefg");
}

TEST(FrameWriter, ClosePayloadIsCodeThenReason) {
  EXPECT_EQ(close_payload(1009, "big"), std::string("\x03\xf1"
                                                    "big",
                                                    5));
  EXPECT_EQ(close_payload(1000, std::string(200, 'r')).size(), 125u);
}

}  // namespace
}  // namespace zn::websocket
