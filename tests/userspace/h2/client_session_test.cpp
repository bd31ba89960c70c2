// H2ClientSession against a real nghttp2 server, and against raw frames for
// an upstream that floods.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "raw_frames.h"
#include "session_fixture.h"

namespace zn::h2::test {
namespace {

class ClientSessionTest : public ::testing::Test {
 protected:
  void pump() { ex_.pump(client_, upstream_); }
  std::string body_of(int32_t id) {
    std::string body;
    for (const auto& d : of<ResponseData>(ex_.events))
      if (d.stream_id == id) body += d.bytes;
    return body;
  }
  const ResponseHeaders* response(int32_t id) {
    for (const auto& e : ex_.events)
      if (const auto* h = std::get_if<ResponseHeaders>(&e); h != nullptr && h->stream_id == id) return h;
    return nullptr;
  }

  H2ClientSession client_;
  NgPeer upstream_{NgPeer::Role::kServer};
  ClientExchange ex_;
};

TEST_F(ClientSessionTest, GetRoundTrip) {
  const int32_t id =
      client_.submit_request("GET", "https", "api.example", "/v1?x=1",
                             {{"Accept", "*/*"}, {"Host", "api.example"}, {"Connection", "x"}}, false);
  ASSERT_GT(id, 0);
  pump();
  ASSERT_EQ(upstream_.requests_seen.size(), 1u);
  const Fields& seen = upstream_.streams[id].headers;
  EXPECT_EQ(find_field(seen, ":authority"), "api.example");
  EXPECT_EQ(find_field(seen, ":path"), "/v1?x=1");
  EXPECT_EQ(find_field(seen, "accept"), "*/*");
  EXPECT_EQ(find_field(seen, "host"), "") << "Host travels as :authority";
  EXPECT_EQ(find_field(seen, "connection"), "");
  EXPECT_TRUE(upstream_.streams[id].ended);

  upstream_.respond(id, {{":status", "200"}, {"content-type", "application/json"}}, std::string("{}"));
  pump();
  const ResponseHeaders* r = response(id);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->end_stream);
  ASSERT_EQ(r->headers.size(), 1u);
  EXPECT_EQ(r->headers[0].name, "content-type");
  EXPECT_EQ(body_of(id), "{}");
  EXPECT_TRUE(of<StreamReset>(ex_.events).empty());
  EXPECT_TRUE(ex_.fed.ok);
}

TEST_F(ClientSessionTest, LargeBodiesBothWaysWithTrailers) {
  const std::string up(200 * 1024, 'u'), down(300 * 1024, 'd');
  const int32_t id = client_.submit_request("POST", "https", "api.example", "/grpc", {}, true);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(client_.send_data(id, up.substr(0, 1000), false));
  pump();
  ASSERT_TRUE(client_.send_data(id, up.substr(1000), true));
  pump();
  EXPECT_EQ(upstream_.streams[id].body, up);
  EXPECT_TRUE(upstream_.streams[id].ended);
  upstream_.respond(id, {{":status", "200"}}, down, {{"grpc-status", "0"}});
  pump();
  EXPECT_EQ(body_of(id), down);
  const auto trailers = of<ResponseTrailers>(ex_.events);
  ASSERT_EQ(trailers.size(), 1u);
  ASSERT_EQ(trailers[0].headers.size(), 1u);
  EXPECT_EQ(trailers[0].headers[0].name, "grpc-status");
}

TEST_F(ClientSessionTest, StreamsAnsweredOutOfOrderOneReset) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(client_.submit_request("GET", "https", "a.example", "/", {}, false));
  pump();
  upstream_.reset(ids[2], NGHTTP2_INTERNAL_ERROR);
  for (int i = 4; i >= 0; --i)
    if (i != 2) upstream_.respond(ids[i], {{":status", "200"}}, "r" + std::to_string(i));
  pump();
  for (int i = 0; i < 5; ++i) {
    if (i == 2) continue;
    EXPECT_EQ(body_of(ids[i]), "r" + std::to_string(i));
  }
  const auto resets = of<StreamReset>(ex_.events);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].stream_id, ids[2]);
  EXPECT_EQ(resets[0].error_code, uint32_t{NGHTTP2_INTERNAL_ERROR});
}

TEST_F(ClientSessionTest, ResponseHeaderListTooLargeResetsThatStreamOnly) {
  const int32_t big = client_.submit_request("GET", "https", "a.example", "/big", {}, false);
  const int32_t ok = client_.submit_request("GET", "https", "a.example", "/ok", {}, false);
  pump();
  Fields huge = {{":status", "200"}};
  for (int i = 0; i < 10; ++i) huge.emplace_back("x-big-" + std::to_string(i), std::string(7 * 1024, 'v'));
  upstream_.respond(big, huge, std::string("never"));
  upstream_.respond(ok, {{":status", "200"}}, std::string("fine"));
  pump();
  EXPECT_EQ(response(big), nullptr);
  EXPECT_EQ(body_of(big), "");
  EXPECT_EQ(body_of(ok), "fine");
  EXPECT_EQ(client_.counters().header_list_size, 1u);
  const auto trips = of<LimitTripped>(ex_.events);
  ASSERT_EQ(trips.size(), 1u);
  EXPECT_EQ(trips[0].stream_id, big);
  EXPECT_EQ(upstream_.streams[big].rst_received, std::optional<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_TRUE(ex_.fed.ok);
}

TEST_F(ClientSessionTest, ResponseHeadersUnderTheLimitPass) {
  const int32_t id = client_.submit_request("GET", "https", "a.example", "/", {}, false);
  pump();
  Fields many = {{":status", "200"}};
  for (int i = 0; i < 8; ++i) many.emplace_back("x-big-" + std::to_string(i), std::string(7 * 1024, 'v'));
  upstream_.respond(id, many);
  pump();
  ASSERT_NE(response(id), nullptr);
  EXPECT_EQ(response(id)->headers.size(), 8u);
  EXPECT_EQ(client_.counters().header_list_size, 0u);
}

TEST_F(ClientSessionTest, UpstreamGoawayIsReported) {
  const int32_t a = client_.submit_request("GET", "https", "a.example", "/", {}, false);
  pump();
  nghttp2_submit_goaway(upstream_.session(), NGHTTP2_FLAG_NONE, a, NGHTTP2_NO_ERROR, nullptr, 0);
  pump();
  const auto goaways = of<GoAway>(ex_.events);
  ASSERT_EQ(goaways.size(), 1u);
  EXPECT_EQ(goaways[0].last_stream_id, a);
  EXPECT_LT(client_.submit_request("GET", "https", "a.example", "/", {}, false), 0)
      << "no new stream after GOAWAY";
}

TEST_F(ClientSessionTest, FieldsThatCannotBeSentAreRefused) {
  EXPECT_LT(client_.submit_request("GET", "https", "a.example", "/", {{"x-a", "1\r\nx-b: 2"}}, false), 0);
  EXPECT_LT(client_.submit_request("GET", "https", "a.example", "/", {{":path", "/x"}}, false), 0);
  EXPECT_LT(client_.submit_request("GET", "https", "a.example", "/", {{"bad name", "1"}}, false), 0);
  EXPECT_GT(client_.submit_request("GET", "https", "a.example", "/", {{"x-a", "1"}}, false), 0);
}

// An upstream that floods: raw frames after its SETTINGS.
class FloodingUpstreamTest : public ::testing::Test {
 protected:
  Result send(const std::string& bytes) {
    Result r = client_.feed(bytes_of(bytes));
    for (auto& e : client_.take_events()) events_.push_back(std::move(e));
    out_ += client_.take_output();
    return r;
  }
  void SetUp() override {
    out_ = client_.take_output();  // preface + SETTINGS
    id_ = client_.submit_request("GET", "https", "a.example", "/", {}, false);
    out_ += client_.take_output();
    out_.clear();
  }
  void expect_tripped(const Result& r, Limit limit) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(goaway_code(parse_frames(out_)), 0xb);
    EXPECT_EQ(client_.counters().at(limit), 1u);
    const auto trips = of<LimitTripped>(events_);
    ASSERT_EQ(trips.size(), 1u);
    EXPECT_EQ(trips[0].limit, limit);
  }
  H2ClientSession client_;
  int32_t id_ = 0;
  std::vector<ClientEvent> events_;
  std::string out_;
};

std::string times(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST_F(FloodingUpstreamTest, PingFloodIsTripped) {
  expect_tripped(send(settings() + times(ping(), 21)), Limit::ping_frames);
}

TEST_F(FloodingUpstreamTest, SettingsFloodIsTripped) {
  expect_tripped(send(times(settings(), 11)), Limit::settings_frames);
}

TEST_F(FloodingUpstreamTest, ContinuationFloodIsTripped) {
  std::string bytes = settings() + headers(id_, hpack_literals({{":status", "200"}}), 0);
  for (int i = 0; i < 17; ++i) bytes += frame(kContinuation, 0, id_, hpack_literals({{"x", "y"}}));
  expect_tripped(send(bytes), Limit::continuation_frames);
}

TEST_F(FloodingUpstreamTest, AnUpstreamUnderTheLimitsIsHeard) {
  std::string bytes =
      settings() + settings_ack() + times(ping(), 20) + headers(id_, hpack_literals({{":status", "200"}}), 0);
  for (int i = 0; i < 15; ++i) bytes += frame(kContinuation, 0, id_, hpack_literals({{"x", "y"}}));
  bytes += frame(kContinuation, kEndHeaders, id_, "") + data(id_, "ok", kEndStream);
  const Result r = send(bytes);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(of<LimitTripped>(events_).empty());
  const auto data_events = of<ResponseData>(events_);
  ASSERT_EQ(data_events.size(), 1u);
  EXPECT_EQ(data_events[0].bytes, "ok");
}

}  // namespace
}  // namespace zn::h2::test
