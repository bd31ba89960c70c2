// The flood bounds against raw, hand-built frames: each limit tripped
// (GOAWAY ENHANCE_YOUR_CALM or the RFC's code, a LimitTripped event, feed()
// failing, the counter) beside the same shape just under the limit passing.
#include <gtest/gtest.h>

#include <chrono>

#include "raw_session.h"

namespace zn::h2::test {
namespace {

class FloodTest : public RawSessionTest {};

// --- CONTINUATION ---

// A GET whose block is split into 1 HEADERS + `continuations` frames.
std::string split_block(uint32_t stream_id, int continuations) {
  std::string block = hpack_literals({{":method", "GET"},
                                      {":scheme", "https"},
                                      {":authority", "example.com"},
                                      {":path", "/"},
                                      {"x-pad", std::string(200, 'a')}});
  const size_t piece = block.size() / (continuations + 1);
  std::string out = headers(stream_id, block.substr(0, piece), kEndStream);
  size_t at = piece;
  for (int i = 0; i < continuations; ++i) {
    const bool last = i == continuations - 1;
    const std::string part = last ? block.substr(at) : block.substr(at, piece);
    out += frame(kContinuation, last ? kEndHeaders : 0, stream_id, part);
    at += part.size();
  }
  return out;
}

TEST_F(FloodTest, ContinuationFloodIsEnhanceYourCalm) {
  open();
  expect_connection_tripped(send(split_block(1, 17)), Limit::continuation_frames, kEnhanceYourCalm);
  EXPECT_TRUE(of<RequestHeaders>(events_).empty());
}

TEST_F(FloodTest, SixteenContinuationsPass) {
  open();
  expect_untouched(send(split_block(1, 16)));
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 1u);
}

// --- rapid reset ---

TEST_F(FloodTest, RapidResetIsTripped) {
  open();
  expect_connection_tripped(send(open_streams(1, 201, true)), Limit::peer_resets, kEnhanceYourCalm);
}

TEST_F(FloodTest, ResetsUnderTheRatePass) {
  open();
  expect_untouched(send(open_streams(1, 200, true)));
  now_ += std::chrono::seconds(10);  // the next window
  expect_untouched(send(open_streams(401, 150, true)));
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 350u);
  EXPECT_EQ(of<StreamReset>(events_).size(), 350u);
}

// --- SETTINGS and PING ---

TEST_F(FloodTest, SettingsFloodIsTripped) {
  open();  // one SETTINGS already
  expect_connection_tripped(send(repeat(settings(), 10)), Limit::settings_frames, kEnhanceYourCalm);
}

TEST_F(FloodTest, SettingsUnderTheRatePass) {
  open();
  expect_untouched(send(repeat(settings(), 9)));
  now_ += std::chrono::seconds(1);
  expect_untouched(send(repeat(settings(), 10)));
}

TEST_F(FloodTest, PingFloodIsTripped) {
  open();
  expect_connection_tripped(send(repeat(ping(), 21)), Limit::ping_frames, kEnhanceYourCalm);
}

TEST_F(FloodTest, PingsUnderTheRatePassAndAreAnswered) {
  open();
  expect_untouched(send(repeat(ping(), 20)));
  int acks = 0;
  for (const Frame& f : frames()) acks += f.type == kPing && (f.flags & kAck);
  EXPECT_EQ(acks, 20);
}

TEST_F(FloodTest, UnsentPingAcksPilingUpAreTripped) {
  H2Limits limits;
  limits.ping_frames.events = 10000;
  limits.max_queued_acks = 50;
  start(limits);
  open();
  // One feed, no take_output between: the ACKs cannot leave.
  const Result r = server_->feed(bytes_of(repeat(ping(), 60)));
  for (auto& e : server_->take_events()) events_.push_back(std::move(e));
  out_ += server_->take_output();
  expect_connection_tripped(r, Limit::queued_acks, kEnhanceYourCalm);
}

TEST_F(FloodTest, PingAcksTakenAsTheyComePass) {
  H2Limits limits;
  limits.ping_frames.events = 10000;
  limits.max_queued_acks = 50;
  start(limits);
  open();
  for (int i = 0; i < 6; ++i) expect_untouched(send(repeat(ping(), 10)));
}

// --- WINDOW_UPDATE ---

TEST_F(FloodTest, ConnectionWindowOverflowIsFlowControlError) {
  open();
  const Result r = send(window_update(0, 0x7fffffff));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(goaway_code(frames()), int64_t{kFlowControlError});
  EXPECT_EQ(server_->counters().invalid_window_updates, 1u);
  ASSERT_EQ(trips().size(), 1u);
  EXPECT_EQ(trips()[0].stream_id, 0);
}

TEST_F(FloodTest, StreamWindowOverflowResetsThatStream) {
  open();
  const Result r = send(headers(1, get_block(), kEndHeaders | kEndStream) + window_update(1, 0x7fffffff));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(rst_code(frames(), 1), int64_t{kFlowControlError});
  EXPECT_EQ(goaway_code(frames()), -1);
  EXPECT_EQ(server_->counters().invalid_window_updates, 1u);
}

TEST_F(FloodTest, ZeroIncrementOnTheConnectionIsProtocolError) {
  open();
  const Result r = send(window_update(0, 0));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(goaway_code(frames()), int64_t{kProtocolError});
  EXPECT_EQ(server_->counters().invalid_window_updates, 1u);
}

// RFC 9113 6.9 makes it a stream error; nghttp2 1.52 closes the connection
// (stricter, and what this test pins down so a change is noticed).
TEST_F(FloodTest, ZeroIncrementOnAStreamIsProtocolError) {
  open();
  const Result r = send(headers(1, get_block(), kEndHeaders | kEndStream) + window_update(1, 0));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(goaway_code(frames()), int64_t{kProtocolError});
  EXPECT_EQ(server_->counters().invalid_window_updates, 1u);
}

TEST_F(FloodTest, WindowUpdatesThatFitPass) {
  open();
  expect_untouched(send(window_update(0, 1 << 20) + headers(1, get_block(), kEndHeaders | kEndStream) +
                        window_update(1, 1 << 20)));
  EXPECT_EQ(server_->counters().invalid_window_updates, 0u);
}

TEST_F(FloodTest, TinyWindowUpdateFloodIsTripped) {
  open();
  expect_connection_tripped(send(repeat(window_update(0, 1), 101)), Limit::small_window_updates,
                            kEnhanceYourCalm);
}

TEST_F(FloodTest, TinyWindowUpdatesUnderTheRatePass) {
  open();
  expect_untouched(send(repeat(window_update(0, 1), 100)));
}

// --- empty DATA ---

TEST_F(FloodTest, EmptyDataFloodIsTripped) {
  open();
  EXPECT_TRUE(send(headers(1, get_block(), kEndHeaders)).ok);
  expect_connection_tripped(send(repeat(data(1, ""), 101)), Limit::empty_data_frames, kEnhanceYourCalm);
}

TEST_F(FloodTest, EmptyDataUnderTheRatePasses) {
  open();
  expect_untouched(
      send(headers(1, get_block(), kEndHeaders) + repeat(data(1, ""), 100) + data(1, "", kEndStream)));
}

// --- frame size, SETTINGS entries ---

TEST_F(FloodTest, OversizedFrameIsFrameSizeError) {
  open();
  EXPECT_TRUE(send(headers(1, get_block(), kEndHeaders)).ok);
  expect_connection_tripped(send(data(1, std::string(16385, 'd'))), Limit::frame_size, kFrameSizeError);
}

TEST_F(FloodTest, MaximumSizedFramePasses) {
  open();
  expect_untouched(send(headers(1, get_block(), kEndHeaders) + data(1, std::string(16384, 'd'), kEndStream)));
  EXPECT_EQ(of<RequestData>(events_).size(), 1u);
}

TEST_F(FloodTest, TooManySettingsEntriesIsTripped) {
  open();
  std::vector<std::pair<uint16_t, uint32_t>> entries(33, {0x3, 100});
  expect_connection_tripped(send(settings(entries)), Limit::settings_entries, kEnhanceYourCalm);
}

TEST_F(FloodTest, ThirtyTwoSettingsEntriesPass) {
  open();
  std::vector<std::pair<uint16_t, uint32_t>> entries(32, {0x3, 100});
  expect_untouched(send(settings(entries)));
}

// --- concurrent streams ---

TEST_F(FloodTest, StreamsOverTheUnacknowledgedLimitAreRefused) {
  H2Limits limits;
  limits.max_concurrent_streams = 5;
  start(limits);
  open(/*ack=*/false);
  const Result r = send(open_streams(1, 7, false));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 5u);
  EXPECT_EQ(rst_code(frames(), 11), int64_t{kRefusedStream});
  EXPECT_EQ(rst_code(frames(), 13), int64_t{kRefusedStream});
  EXPECT_EQ(rst_code(frames(), 9), -1);
  EXPECT_EQ(server_->counters().concurrent_streams, 2u);
  ASSERT_EQ(trips().size(), 2u);
  EXPECT_EQ(trips()[0].stream_id, 11);
}

TEST_F(FloodTest, StreamsOverTheAcknowledgedLimitCloseTheConnection) {
  H2Limits limits;
  limits.max_concurrent_streams = 5;
  start(limits);
  open(/*ack=*/true);
  const Result r = send(open_streams(1, 6, false));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(goaway_code(frames()), int64_t{kProtocolError})
      << "nghttp2's choice for a limit the peer acknowledged";
  EXPECT_EQ(server_->counters().concurrent_streams, 1u);
}

TEST_F(FloodTest, StreamsUpToTheLimitPass) {
  H2Limits limits;
  limits.max_concurrent_streams = 5;
  start(limits);
  open(/*ack=*/true);
  expect_untouched(send(open_streams(1, 5, false)));
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 5u);
}

// --- HPACK decoding (bombs) ---

// One 4000-byte field entered in the dynamic table, then referenced by
// 1-byte indices, `references` of them: a ~240 KB block decodes to ~1 GB.
std::string bomb_block(size_t references, bool with_entry) {
  std::string block = hpack_literals(
      {{":method", "GET"}, {":scheme", "https"}, {":authority", "example.com"}, {":path", "/"}});
  if (with_entry) block += hpack_indexed_literal("x-bomb", std::string(4000, 'a'));
  block.append(references, '\xbe');  // index 62: the newest entry
  return block;
}

TEST_F(FloodTest, HpackBombIsTrippedInItsFirstBlock) {
  open();
  const Result r = send(header_block(1, bomb_block(240 * 1024, true), kEndStream));
  expect_connection_tripped(r, Limit::decoded_header_bytes, kEnhanceYourCalm);
  EXPECT_TRUE(of<RequestHeaders>(events_).empty());
}

// The same bomb on a stream the session reset: nghttp2 decodes it without
// a callback (to keep HPACK state), still counted.
TEST_F(FloodTest, HpackBombOnAResetStreamIsTripped) {
  open();
  const std::string upper = hpack_literals(
      {{":method", "POST"}, {":scheme", "https"}, {":authority", "example.com"}, {":path", "/"}});
  ASSERT_TRUE(send(headers(1,
                           upper + hpack_indexed_literal("x-bomb", std::string(4000, 'a')) +
                               hpack_literals({{"X-Up", "1"}}),
                           kEndHeaders))
                  .ok);
  ASSERT_EQ(rst_code(frames(), 1), int64_t{kProtocolError});
  Result r;
  for (int i = 0; i < 10 && r.ok; ++i) r = send(header_block(1, bomb_block(240 * 1024, false), 0));
  expect_connection_tripped(r, Limit::decoded_header_bytes, kEnhanceYourCalm);
}

// Spread over many requests, each under the header list size (no 431):
// the budget is the connection's, not the block's.
TEST_F(FloodTest, HpackBombSpreadOverRequestsIsTripped) {
  open();
  ASSERT_TRUE(send(headers(1, bomb_block(0, true), kEndHeaders | kEndStream)).ok);
  answer(1);
  Result r;
  uint32_t id = 3;
  for (; id < 2000 && r.ok; id += 2) {
    r = send(headers(id, bomb_block(14, false), kEndHeaders | kEndStream));  // ~60 KiB each
    if (r.ok) answer(id);
  }
  expect_connection_tripped(r, Limit::decoded_header_bytes, kEnhanceYourCalm);
  EXPECT_LT(id, 700u) << "16 MiB is ~300 such lists";
  EXPECT_TRUE(of<StreamRejected>(events_).empty());
}

// The positive control: large but honest header blocks (60 KB of literal
// fields each, 100 requests = 6 MB decoded in one window, and the same
// indexed-field requests spread over windows) pass.
TEST_F(FloodTest, LargeHonestHeaderBlocksPass) {
  open();
  for (uint32_t id = 1; id < 200; id += 2) {
    const std::string block = get_block() + hpack_literals({{"cookie", std::string(30000, 'c')},
                                                            {"x-big", std::string(30000, 'b')}});
    ASSERT_TRUE(send(header_block(id, block, kEndStream)).ok) << id;
    answer(id);
  }
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 100u);
  ASSERT_TRUE(send(headers(201, bomb_block(0, true), kEndHeaders | kEndStream)).ok);
  answer(201);
  for (uint32_t id = 203; id < 1400; id += 2) {
    if (id % 200 == 3) now_ += std::chrono::seconds(10);  // 100 requests a window
    ASSERT_TRUE(send(headers(id, bomb_block(14, false), kEndHeaders | kEndStream)).ok) << id;
    answer(id);
  }
  expect_untouched(send(ping()));
  EXPECT_EQ(of<RequestHeaders>(events_).size(), 700u);
}

// Header lists over the size are answered 431; a client that keeps
// sending them is cut off.
std::string oversized_get(uint32_t id) {
  return header_block(
      id,
      get_block() + hpack_literals({{"x-big", std::string(35000, 'b')}, {"x-big2", std::string(35000, 'b')}}),
      kEndStream);
}

TEST_F(FloodTest, RefusedHeaderListsOverTheRateAreTripped) {
  open();
  Result r;
  for (uint32_t id = 1; id < 100 && r.ok; id += 2) r = send(oversized_get(id));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("header_list_refusals"), std::string::npos) << r.error;
  EXPECT_EQ(goaway_code(frames()), int64_t{kEnhanceYourCalm});
  // Twenty answered 431 (each a stream's trip), the 21st ends the connection.
  ASSERT_EQ(trips().size(), 21u);
  EXPECT_EQ(trips().back().limit, Limit::header_list_refusals);
  EXPECT_EQ(trips().back().stream_id, 0);
  EXPECT_EQ(server_->counters().header_list_size, 20u);
  EXPECT_EQ(server_->counters().header_list_refusals, 1u);
}

TEST_F(FloodTest, RefusedHeaderListsUnderTheRatePass) {
  open();
  for (uint32_t id = 1; id < 40; id += 2) ASSERT_TRUE(send(oversized_get(id)).ok) << id;
  now_ += std::chrono::seconds(10);
  for (uint32_t id = 41; id < 80; id += 2) ASSERT_TRUE(send(oversized_get(id)).ok) << id;
  EXPECT_EQ(server_->counters().header_list_size, 40u);
  EXPECT_EQ(server_->counters().header_list_refusals, 0u);
  EXPECT_EQ(goaway_code(frames()), -1);
}

// --- malformed by hand ---

TEST_F(FloodTest, UppercaseHeaderNameResetsThatStreamOnly) {
  open();
  const std::string bad = hpack_literals({{":method", "GET"},
                                          {":scheme", "https"},
                                          {":authority", "example.com"},
                                          {":path", "/"},
                                          {"X-Upper", "1"}});
  const std::string good = hpack_literals({{":method", "GET"},
                                           {":scheme", "https"},
                                           {":authority", "example.com"},
                                           {":path", "/"},
                                           {"x-lower", "1"}});
  const Result r =
      send(headers(1, bad, kEndHeaders | kEndStream) + headers(3, good, kEndHeaders | kEndStream));
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(rst_code(frames(), 1), int64_t{kProtocolError});
  EXPECT_EQ(rst_code(frames(), 3), -1);
  const auto reqs = of<RequestHeaders>(events_);
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].stream_id, 3);
  const auto rejected = of<StreamRejected>(events_);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].stream_id, 1);
}

}  // namespace
}  // namespace zn::h2::test
