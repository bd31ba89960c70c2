// RFC 9113's answers that nghttp2 leaves to us, against raw frames: the
// PRIORITY frame's own rules (6.3, 5.3.1; nghttp2 skips the frame once
// SETTINGS_NO_RFC7540_PRIORITIES is on), frames on closed streams (5.1) and
// stream ids that do not grow (5.1.1). Each with the well-formed shape
// beside it passing. h2spec (tests/integration/h2spec_test.cpp) runs the
// outside suite end to end.
#include <gtest/gtest.h>

#include "raw_session.h"
#include "userspace/h2/peer_streams.h"

namespace zn::h2::test {
namespace {

constexpr uint32_t kStreamClosed = 0x5;
constexpr uint8_t kPriorityFlag = 0x20;

class ConformanceTest : public RawSessionTest {
 protected:
  // `bytes` fed whole, or one byte at a time (frames split across reads).
  Result send_split(const std::string& bytes, bool bytewise) {
    if (!bytewise) return send(bytes);
    Result r;
    for (char c : bytes) {
      r = send(std::string(1, c));
      if (!r.ok) break;
    }
    return r;
  }
  std::vector<int32_t> requests() {
    std::vector<int32_t> ids;
    for (const auto& h : of<RequestHeaders>(events_)) ids.push_back(h.stream_id);
    return ids;
  }
  std::string get(uint32_t id, uint8_t flags = kEndHeaders | kEndStream) {
    return headers(id, get_block(), flags);
  }
};

// --- PRIORITY (6.3, 5.3.1) ---

TEST_F(ConformanceTest, PriorityOnStreamZeroIsProtocolError) {
  for (bool bytewise : {false, true}) {
    SCOPED_TRACE(bytewise);
    events_.clear();
    out_.clear();
    start();
    open();
    expect_connection_error(send_split(priority(0, 1), bytewise), kProtocolError);
  }
}

TEST_F(ConformanceTest, PriorityOfAnotherLengthIsFrameSizeError) {
  for (const std::string& payload : {std::string(), std::string(4, '\0'), std::string(6, '\0')}) {
    SCOPED_TRACE(payload.size());
    events_.clear();
    out_.clear();
    start();
    open();
    expect_connection_error(send(frame(kPriority, 0, 1, payload)), kFrameSizeError);
  }
}

// A stream depending on itself: idle, open, closed, exclusive or not, the
// frame whole or split byte by byte. RFC 9113 asks a stream error; a
// connection error is the answer here (5.4.1 allows it).
TEST_F(ConformanceTest, PriorityOnItselfIsProtocolError) {
  struct Case {
    const char* name;
    std::string before;
    uint32_t stream;
    bool exclusive;
  };
  const Case cases[] = {
      {"idle", "", 3, false},
      {"idle, exclusive", "", 3, true},
      {"open", headers(1, get_block(), kEndHeaders), 1, false},
      {"half-closed (remote)", headers(1, get_block(), kEndHeaders | kEndStream), 1, true},
      {"closed by the client's reset", headers(1, get_block(), kEndHeaders) + rst_stream(1, kCancel), 1,
       false},
  };
  for (const Case& c : cases) {
    for (bool bytewise : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (bytewise ? ", bytewise" : ""));
      events_.clear();
      out_.clear();
      start();
      open();
      ASSERT_TRUE(send(c.before).ok);
      expect_connection_error(send_split(priority(c.stream, c.stream, c.exclusive), bytewise),
                              kProtocolError);
    }
  }
}

// HEADERS carrying a priority on itself: nghttp2's own check, same answer.
TEST_F(ConformanceTest, HeadersWithPriorityOnItselfIsProtocolError) {
  open();
  const std::string dependency("\x00\x00\x00\x01\x0f", 5);
  expect_connection_error(
      send(headers(1, dependency + get_block(), kEndHeaders | kEndStream | kPriorityFlag)), kProtocolError);
}

// The positive control: PRIORITY frames as clients did send them (on idle
// streams building a tree, on open and closed streams, exclusive, split)
// pass, and the requests around them are served.
TEST_F(ConformanceTest, WellFormedPriorityFramesPass) {
  for (bool bytewise : {false, true}) {
    SCOPED_TRACE(bytewise);
    events_.clear();
    out_.clear();
    start();
    open();
    std::string bytes = priority(3, 0) + priority(5, 3, true, 200) + priority(7, 0, false, 0) + get(9) +
                        priority(9, 3) + priority(9, 0, true);
    EXPECT_TRUE(send_split(bytes, bytewise).ok);
    answer(9);
    // On the closed stream 9, and a new stream below an idle PRIORITY's id
    // (h2spec's generic 3.3/5).
    expect_untouched(send_split(priority(9, 5) + priority(13, 0) + get(11), bytewise));
    EXPECT_EQ(requests(), (std::vector<int32_t>{9, 11}));
  }
}

// --- frames on closed streams (5.1) ---

// HEADERS, trailers-shaped HEADERS or DATA on a stream the client ended
// (END_STREAM on HEADERS or on DATA), once it has closed: connection
// error STREAM_CLOSED.
TEST_F(ConformanceTest, FramesOnAStreamTheClientEndedAreStreamClosed) {
  const std::string opens[] = {
      get(1),
      headers(1, get_block("/upload"), kEndHeaders) + data(1, "body", kEndStream),
  };
  const std::string afters[] = {
      get(1),
      headers(1, hpack_literals({{"x-trailer", "1"}}), kEndHeaders | kEndStream),
      data(1, "more"),
      data(1, "", kEndStream),
  };
  for (const std::string& first : opens) {
    for (const std::string& after : afters) {
      events_.clear();
      out_.clear();
      start();
      open();
      ASSERT_TRUE(send(first).ok);
      answer(1);
      expect_connection_error(send(after), kStreamClosed);
    }
  }
}

// Before the answer (half-closed remote), nghttp2's own answer: the same.
TEST_F(ConformanceTest, FramesOnAHalfClosedStreamAreStreamClosed) {
  for (const std::string& after : {get(1), data(1, "more")}) {
    events_.clear();
    out_.clear();
    start();
    open();
    expect_connection_error(send(get(1) + after), kStreamClosed);
  }
}

// The client reset the stream, then sent on it: STREAM_CLOSED.
TEST_F(ConformanceTest, FramesAfterTheClientsResetAreStreamClosed) {
  for (const std::string& after :
       {data(1, "x"), get(1), headers(1, hpack_literals({{"x-trailer", "1"}}), kEndHeaders | kEndStream)}) {
    for (bool same_read : {false, true}) {
      events_.clear();
      out_.clear();
      start();
      open();
      const std::string reset = headers(1, get_block("/upload"), kEndHeaders) + rst_stream(1, kCancel);
      if (same_read) {
        expect_connection_error(send(reset + after), kStreamClosed);
      } else {
        ASSERT_TRUE(send(reset).ok);
        expect_connection_error(send(after), kStreamClosed);
      }
    }
  }
}

// The positive control: after OUR reset, what the client had in flight is
// ignored (RFC 9113 5.1), and so are WINDOW_UPDATE, RST_STREAM and PRIORITY
// on a closed stream; the connection serves the next request.
TEST_F(ConformanceTest, FramesAfterOurResetAndLateControlFramesAreIgnored) {
  open();
  const std::string upper = hpack_literals({{":method", "POST"},
                                            {":scheme", "https"},
                                            {":authority", "example.com"},
                                            {":path", "/"},
                                            {"X-Up", "1"}});
  ASSERT_TRUE(send(headers(1, upper, kEndHeaders)).ok);  // malformed: we reset it
  ASSERT_EQ(rst_code(frames(), 1), int64_t{kProtocolError});
  ASSERT_TRUE(send(get(3)).ok);
  answer(3);  // closed normally
  expect_untouched(send(data(1, "in flight") + data(1, "") +
                        headers(1, hpack_literals({{"x-trailer", "1"}}), kEndHeaders | kEndStream) +
                        window_update(3, 100) + rst_stream(3, kCancel) + priority(3, 0) + get(5)));
  EXPECT_EQ(requests(), (std::vector<int32_t>{3, 5}));
  EXPECT_TRUE(server_->feed(bytes_of(ping())).ok);
}

// --- stream identifiers (5.1.1) ---

// A new stream on an id below the last one opened: whether that stream is
// still open or closed, in one read or two, right below or far below.
TEST_F(ConformanceTest, ALowerStreamIdIsProtocolError) {
  struct Case {
    const char* name;
    std::string before, lower;
    bool answer_last;
  };
  const Case cases[] = {
      {"below an open stream", get(5, kEndHeaders), get(3), false},
      {"below a closed stream", get(5), get(3), true},
      {"far below", get(1) + get(101), get(51), true},
      {"the first id skipped", get(3), get(1), false},
      {"without END_STREAM", get(5), get(3, kEndHeaders), false},
  };
  for (const Case& c : cases) {
    for (bool same_read : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (same_read ? ", one read" : ""));
      events_.clear();
      out_.clear();
      start();
      open();
      if (same_read && !c.answer_last) {
        expect_connection_error(send(c.before + c.lower), kProtocolError);
        continue;
      }
      ASSERT_TRUE(send(c.before).ok);
      if (c.answer_last) answer(requests().back());
      expect_connection_error(send(c.lower), kProtocolError);
    }
  }
}

// The positive control: ids that grow, with gaps, pass.
TEST_F(ConformanceTest, GrowingStreamIdsWithGapsPass) {
  open();
  expect_untouched(send(get(1) + get(7) + get(9) + get(301)));
  EXPECT_EQ(requests(), (std::vector<int32_t>{1, 7, 9, 301}));
}

// --- the memory of closed streams is bounded ---

TEST(PeerStreamsTest, RemembersTheNewestStreamsOnly) {
  PeerStreams streams(3);
  for (uint32_t id : {1u, 3u, 7u, 9u}) streams.opened(id);
  streams.peer_ended(3);
  streams.peer_ended(7);
  streams.local_reset(7);
  streams.peer_reset(9);
  EXPECT_EQ(streams.last(), 9u);
  EXPECT_EQ(streams.closed(1), PeerStreams::Answer::ignore);  // forgotten
  EXPECT_EQ(streams.closed(3), PeerStreams::Answer::stream_closed);
  EXPECT_EQ(streams.closed(5), PeerStreams::Answer::never_opened);
  EXPECT_EQ(streams.closed(7), PeerStreams::Answer::stream_closed);  // the client ended it first
  EXPECT_EQ(streams.closed(9), PeerStreams::Answer::stream_closed);
  streams.opened(11);
  streams.local_reset(11);
  EXPECT_EQ(streams.closed(11), PeerStreams::Answer::ignore);
  EXPECT_EQ(streams.closed(3), PeerStreams::Answer::ignore);  // forgotten now
}

}  // namespace
}  // namespace zn::h2::test
