// The agent's reply seal: what zerod accepts is exactly the frames the agent
// sealed for this command, in order, under this session's result key.
#include "userspace/command/reply_seal.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <vector>

namespace zn::command {
namespace {

class ReplySealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    randombytes_buf(key_.data(), key_.size());
    randombytes_buf(nonce_.data(), nonce_.size());
    ReplySealer sealer(key_, nonce_);
    for (auto [kind, payload] : {std::pair{FrameKind::kStdout, "out"}, std::pair{FrameKind::kStderr, "err"},
                                 std::pair{FrameKind::kResult, "{\"exit_code\":0}"}}) {
      std::string wire = sealer.seal(kind, payload);
      frames_.push_back(*take_frame(wire));
      ASSERT_TRUE(wire.empty());
    }
  }
  // How many frames open, in order, before the first that does not.
  size_t opened(std::vector<Frame> frames, const ResultKey& key, const Nonce& nonce) {
    ReplyOpener opener(key, nonce);
    size_t n = 0;
    for (Frame& f : frames) {
      if (!opener.open(f)) break;
      ++n;
    }
    return n;
  }
  ResultKey key_{};
  Nonce nonce_{};
  std::vector<Frame> frames_;
};

TEST_F(ReplySealTest, TheAgentsFramesOpenInOrderWithTheirPayloads) {
  ReplyOpener opener(key_, nonce_);
  std::vector<Frame> f = frames_;
  for (Frame& x : f) ASSERT_TRUE(opener.open(x));
  EXPECT_EQ(f[0].payload, "out");
  EXPECT_EQ(f[1].payload, "err");
  EXPECT_EQ(f[2].payload, "{\"exit_code\":0}");
}

TEST_F(ReplySealTest, AnyChangedByteIsRefused) {
  for (size_t i = 0; i < frames_[2].payload.size(); ++i) {
    std::vector<Frame> f = frames_;
    f[2].payload[i] ^= 0x01;
    EXPECT_EQ(opened(f, key_, nonce_), 2u) << "byte " << i;
  }
  std::vector<Frame> kind = frames_;
  kind[0].kind = FrameKind::kStderr;  // stdout relabelled as stderr
  EXPECT_EQ(opened(kind, key_, nonce_), 0u);
}

TEST_F(ReplySealTest, DroppedRepeatedOrReorderedFramesAreRefused) {
  std::vector<Frame> dropped = {frames_[0], frames_[2]};
  EXPECT_EQ(opened(dropped, key_, nonce_), 1u);
  std::vector<Frame> repeated = {frames_[0], frames_[0]};
  EXPECT_EQ(opened(repeated, key_, nonce_), 1u);
  std::vector<Frame> swapped = {frames_[1], frames_[0]};
  EXPECT_EQ(opened(swapped, key_, nonce_), 0u);
}

TEST_F(ReplySealTest, AnotherCommandsOrAnotherSessionsReplyIsRefused) {
  Nonce other_nonce = nonce_;
  other_nonce[0] ^= 1;
  EXPECT_EQ(opened(frames_, key_, other_nonce), 0u);
  ResultKey other_key = key_;
  other_key[31] ^= 1;
  EXPECT_EQ(opened(frames_, other_key, nonce_), 0u);
}

TEST_F(ReplySealTest, AnUnsealedOrCutFrameIsRefused) {
  // What a process that is not the agent would send: a plain frame.
  std::string plain = frame(FrameKind::kResult, "{\"exit_code\":0}");
  std::vector<Frame> forged = {*take_frame(plain)};
  EXPECT_EQ(opened(forged, key_, nonce_), 0u);
  std::vector<Frame> short_tag = frames_;
  short_tag[0].payload.resize(kReplyTagSize - 1);
  EXPECT_EQ(opened(short_tag, key_, nonce_), 0u);
}

TEST(ResultKeyHex, RoundTripsAndRefusesOtherLengths) {
  ResultKey k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<unsigned char>(i);
  ResultKey back{};
  ASSERT_TRUE(parse_result_key(result_key_hex(k), back));
  EXPECT_EQ(back, k);
  EXPECT_FALSE(parse_result_key(result_key_hex(k).substr(2), back));
  EXPECT_FALSE(parse_result_key(result_key_hex(k) + "00", back));
  EXPECT_FALSE(parse_result_key(std::string(64, 'g'), back));
}

}  // namespace
}  // namespace zn::command
