// H2ServerSession against a real nghttp2 client: requests as events, answers
// per stream, flow control, and the RFC 9113 8 refusals (each beside a
// request of the same shape that passes).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "session_fixture.h"

namespace zn::h2::test {
namespace {

class ServerSessionTest : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) { server_ = std::make_unique<H2ServerSession>(std::move(options)); }
  void pump() { ex_.pump(*server_, peer_); }
  H2ServerSession& server() {
    if (!server_) start();
    return *server_;
  }
  std::vector<RequestHeaders> requests() { return of<RequestHeaders>(ex_.events); }
  std::string body_of(int32_t id) {
    std::string body;
    for (const auto& d : of<RequestData>(ex_.events))
      if (d.stream_id == id) body += d.bytes;
    return body;
  }
  bool ended(int32_t id) {
    for (const auto& d : of<RequestData>(ex_.events))
      if (d.stream_id == id && d.end_stream) return true;
    for (const auto& r : requests())
      if (r.stream_id == id && r.end_stream) return true;
    return false;
  }
  int status_seen(int32_t id) {
    const std::string s = find_field(peer_.streams[id].headers, ":status");
    return s.empty() ? 0 : std::stoi(s);
  }
  // Sends a request that must be rejected, then a good one; both on one
  // connection.
  void expect_rejected_then_served(const Fields& bad, const std::string& reason_part);

  std::unique_ptr<H2ServerSession> server_;
  NgPeer peer_{NgPeer::Role::kClient};
  ServerExchange ex_;
};

TEST_F(ServerSessionTest, GetRoundTrip) {
  server();
  Fields req = get_request("/a?b=c");
  req.emplace_back("user-agent", "test/1");
  const int32_t id = peer_.request(req);
  pump();
  ASSERT_TRUE(ex_.fed.ok) << ex_.fed.error;
  auto reqs = requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].stream_id, id);
  EXPECT_EQ(reqs[0].method, "GET");
  EXPECT_EQ(reqs[0].scheme, "https");
  EXPECT_EQ(reqs[0].authority, "example.com");
  EXPECT_EQ(reqs[0].path, "/a?b=c");
  EXPECT_TRUE(reqs[0].end_stream);
  ASSERT_EQ(reqs[0].headers.size(), 1u);
  EXPECT_EQ(reqs[0].headers[0].name, "user-agent");

  // Names lower-cased and connection-specific fields dropped on the way out.
  ASSERT_TRUE(
      server().submit_response(id, 200, {{"Content-Type", "text/plain"}, {"Connection", "close"}}, true));
  ASSERT_TRUE(server().send_data(id, "hello", true));
  EXPECT_FALSE(server().send_data(id, "more", true)) << "the body already ended";
  pump();
  EXPECT_EQ(status_seen(id), 200);
  EXPECT_EQ(find_field(peer_.streams[id].headers, "content-type"), "text/plain");
  EXPECT_EQ(find_field(peer_.streams[id].headers, "connection"), "");
  EXPECT_EQ(peer_.streams[id].body, "hello");
  EXPECT_TRUE(peer_.streams[id].closed);
  EXPECT_EQ(peer_.streams[id].close_code, 0u);
  EXPECT_TRUE(of<StreamReset>(ex_.events).empty());
  EXPECT_TRUE(of<LimitTripped>(ex_.events).empty());
}

TEST_F(ServerSessionTest, PostWithBodyAndTrailersRoundTrip) {
  server();
  Fields req = get_request("/upload");
  req[0].second = "POST";
  const std::string body(5000, 'p');
  const int32_t id = peer_.request(req, body);
  pump();
  ASSERT_EQ(requests().size(), 1u);
  EXPECT_FALSE(requests()[0].end_stream);
  EXPECT_EQ(body_of(id), body);
  EXPECT_TRUE(ended(id));

  ASSERT_TRUE(server().submit_response(id, 201, {}, true));
  ASSERT_TRUE(server().send_data(id, "created", false));
  ASSERT_TRUE(server().send_trailers(id, {{"grpc-status", "0"}}));
  pump();
  EXPECT_EQ(status_seen(id), 201);
  EXPECT_EQ(peer_.streams[id].body, "created");
  EXPECT_EQ(find_field(peer_.streams[id].headers, "grpc-status"), "0");
  EXPECT_TRUE(peer_.streams[id].ended);
  EXPECT_EQ(peer_.streams[id].close_code, 0u);
}

TEST_F(ServerSessionTest, ManyStreamsAnsweredOutOfOrder) {
  server();
  std::vector<int32_t> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(peer_.request(get_request("/" + std::to_string(i))));
  pump();
  ASSERT_EQ(requests().size(), ids.size());
  // Answer last first, bodies in two pieces interleaved across streams.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it)
    ASSERT_TRUE(server().submit_response(*it, 200, {}, true));
  for (int32_t id : ids) ASSERT_TRUE(server().send_data(id, "body-", false));
  pump();
  for (auto it = ids.rbegin(); it != ids.rend(); ++it)
    ASSERT_TRUE(server().send_data(*it, std::to_string(*it), true));
  pump();
  for (int32_t id : ids) {
    EXPECT_EQ(peer_.streams[id].body, "body-" + std::to_string(id));
    EXPECT_TRUE(peer_.streams[id].closed);
    EXPECT_EQ(peer_.streams[id].close_code, 0u);
  }
}

TEST_F(ServerSessionTest, OneStreamRefusedAnotherCancelledOthersComplete) {
  server();
  const int32_t a = peer_.request(get_request("/a"));
  const int32_t b = peer_.request(get_request("/b"));
  const int32_t c = peer_.request(get_request("/c"));
  const int32_t d = peer_.request(get_request("/d"));
  pump();
  ASSERT_EQ(requests().size(), 4u);
  ASSERT_TRUE(server().refuse_stream(b));
  ASSERT_TRUE(server().submit_response(c, 200, {}, true));  // the guest cancels it mid-body
  ASSERT_TRUE(server().send_data(c, "partial", false));
  pump();
  peer_.reset(c, NGHTTP2_CANCEL);
  pump();
  for (int32_t id : {a, d}) {
    ASSERT_TRUE(server().submit_response(id, 204, {}, false));
  }
  pump();
  EXPECT_EQ(peer_.streams[b].rst_received, std::optional<uint32_t>(NGHTTP2_REFUSED_STREAM));
  EXPECT_EQ(status_seen(a), 204);
  EXPECT_EQ(status_seen(d), 204);
  EXPECT_EQ(peer_.streams[a].close_code, 0u);
  EXPECT_EQ(peer_.streams[d].close_code, 0u);
  const auto resets = of<StreamReset>(ex_.events);
  ASSERT_EQ(resets.size(), 2u);
  std::map<int32_t, uint32_t> codes;
  for (const auto& r : resets) codes[r.stream_id] = r.error_code;
  EXPECT_EQ(codes[b], uint32_t{NGHTTP2_REFUSED_STREAM});
  EXPECT_EQ(codes[c], uint32_t{NGHTTP2_CANCEL});
  EXPECT_FALSE(server().send_data(c, "more", true)) << "a reset stream takes no more data";
  EXPECT_TRUE(ex_.fed.ok);
}

TEST_F(ServerSessionTest, ResponseLargerThanTheWindowFlowsAsTheClientReads) {
  server();
  const int32_t id = peer_.request(get_request("/big"));
  pump();
  const std::string big(300 * 1024 + 7, 'x');
  ASSERT_TRUE(server().submit_response(id, 200, {}, true));
  ASSERT_TRUE(server().send_data(id, big, true));
  // Before the client reads anything, only the initial window can leave.
  const std::string first = server().take_output();
  EXPECT_LT(first.size(), 70u * 1024);
  EXPECT_GT(server().buffered(id), big.size() - 70 * 1024);
  peer_.feed(first);
  pump();
  EXPECT_EQ(peer_.streams[id].body.size(), big.size());
  EXPECT_EQ(peer_.streams[id].body, big);
  EXPECT_TRUE(peer_.streams[id].closed);
  EXPECT_EQ(server().buffered(id), 0u);
}

TEST_F(ServerSessionTest, UploadLargerThanTheWindow) {
  server();
  Fields req = get_request("/up");
  req[0].second = "PUT";
  const std::string big(200 * 1024, 'u');
  const int32_t id = peer_.request(req, big);
  pump();
  EXPECT_EQ(body_of(id), big);
  EXPECT_TRUE(ended(id));
}

TEST_F(ServerSessionTest, ManualWindowUpdatesHoldTheUploadUntilConsumed) {
  ServerOptions options;
  options.manual_window_updates = true;
  start(options);
  Fields req = get_request("/up");
  req[0].second = "PUT";
  const std::string big(200 * 1024, 'u');
  const int32_t id = peer_.request(req, big);
  pump();
  // The default window: 65535 bytes, then the client waits.
  EXPECT_EQ(body_of(id).size(), 65535u);
  EXPECT_FALSE(ended(id));
  for (int i = 0; i < 10 && !ended(id); ++i) {
    server().consume(id, body_of(id).size());
    ex_.events.clear();
    pump();
  }
  // Everything arrived in pieces no bigger than the window.
  EXPECT_TRUE(ended(id));
}

TEST_F(ServerSessionTest, ManualWindowIsSharedAndAResetStreamsBytesAreGivenBack) {
  ServerOptions options;
  options.manual_window_updates = true;
  start(options);
  Fields req = get_request("/up");
  req[0].second = "PUT";
  const int32_t a = peer_.request(req, std::string(50 * 1024, 'a'));
  const int32_t b = peer_.request(req, std::string(50 * 1024, 'b'));
  pump();
  // 64 KiB of connection window between them: neither is complete.
  EXPECT_EQ(body_of(a).size() + body_of(b).size(), 65535u);
  EXPECT_FALSE(ended(a));
  // The caller refuses b (as policy might) and gives its bytes back; a
  // then completes as its own bytes are consumed.
  ASSERT_TRUE(server().reset_stream(b, NGHTTP2_CANCEL));
  server().consume(b, body_of(b).size());
  for (int i = 0; i < 10 && !ended(a); ++i) {
    const std::string seen = body_of(a);
    server().consume(a, seen.size());
    ex_.events.erase(std::remove_if(ex_.events.begin(), ex_.events.end(),
                                    [&](const ServerEvent& e) {
                                      const auto* d = std::get_if<RequestData>(&e);
                                      return d != nullptr && d->stream_id == a;
                                    }),
                     ex_.events.end());
    pump();
  }
  EXPECT_TRUE(ended(a));
}

void ServerSessionTest::expect_rejected_then_served(const Fields& bad, const std::string& reason_part) {
  server();
  const int32_t bad_id = peer_.request(bad);
  const int32_t good_id = peer_.request(get_request("/fine"));
  pump();
  ASSERT_TRUE(ex_.fed.ok) << ex_.fed.error;
  auto reqs = requests();
  ASSERT_EQ(reqs.size(), 1u) << "only the good request reaches the caller";
  EXPECT_EQ(reqs[0].stream_id, good_id);
  ASSERT_TRUE(server().submit_response(good_id, 200, {}, false));
  pump();
  EXPECT_EQ(status_seen(good_id), 200);
  EXPECT_EQ(peer_.streams[bad_id].rst_received, std::optional<uint32_t>(NGHTTP2_PROTOCOL_ERROR));
  const auto rejected = of<StreamRejected>(ex_.events);
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].stream_id, bad_id);
  EXPECT_NE(rejected[0].reason.find(reason_part), std::string::npos) << rejected[0].reason;
}

TEST_F(ServerSessionTest, MissingPathResetsThatStream) {
  expect_rejected_then_served({{":method", "GET"}, {":scheme", "https"}, {":authority", "example.com"}},
                              "malformed");
}

TEST_F(ServerSessionTest, DuplicateMethodResetsThatStream) {
  Fields bad = get_request();
  bad.insert(bad.begin() + 1, {":method", "POST"});
  expect_rejected_then_served(bad, "malformed");
}

// An upper-case name: flood_test.cpp, by hand (nghttp2 lower-cases what
// its client is given).

TEST_F(ServerSessionTest, ConnectionHeaderResetsThatStream) {
  Fields bad = get_request();
  bad.emplace_back("connection", "keep-alive");
  expect_rejected_then_served(bad, "malformed");
}

TEST_F(ServerSessionTest, TeOtherThanTrailersResetsThatStream) {
  Fields bad = get_request();
  bad.emplace_back("te", "gzip");
  expect_rejected_then_served(bad, "malformed");
}

TEST_F(ServerSessionTest, AuthorityAndHostDisagreeingResetsThatStream) {
  Fields bad = get_request();
  bad.emplace_back("host", "other.example");
  expect_rejected_then_served(bad, ":authority and host differ");
}

// The positive control of the five above: the same shape, well-formed.
TEST_F(ServerSessionTest, WellFormedFieldsOfTheSameShapePass) {
  server();
  Fields ok = get_request();
  ok.emplace_back("te", "trailers");
  ok.emplace_back("host", "EXAMPLE.com");
  ok.emplace_back("x-lower", "1");
  peer_.request(ok);
  peer_.request({{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {"host", "only-host.example"}});
  pump();
  auto reqs = requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].authority, "example.com");
  EXPECT_EQ(reqs[1].authority, "only-host.example") << "Host stands in for a missing :authority";
  EXPECT_TRUE(of<StreamRejected>(ex_.events).empty());
}

TEST_F(ServerSessionTest, ConnectIsRefusedByDefault) {
  server();
  const int32_t id = peer_.request({{":method", "CONNECT"}, {":authority", "example.com:443"}});
  const int32_t ws = peer_.request({{":method", "CONNECT"},
                                    {":protocol", "websocket"},
                                    {":scheme", "https"},
                                    {":authority", "example.com"},
                                    {":path", "/chat"}});
  pump();
  EXPECT_TRUE(requests().empty());
  EXPECT_EQ(status_seen(id), 405);
  EXPECT_TRUE(peer_.streams[ws].rst_received.has_value())
      << "no :protocol without SETTINGS_ENABLE_CONNECT_PROTOCOL";
  EXPECT_EQ(of<StreamRejected>(ex_.events).size(), 2u);
}

TEST_F(ServerSessionTest, ExtendedConnectIsAcceptedWhenEnabled) {
  ServerOptions options;
  options.enable_extended_connect = true;
  start(options);
  const int32_t plain = peer_.request({{":method", "CONNECT"}, {":authority", "example.com:443"}});
  const int32_t ws = peer_.request({{":method", "CONNECT"},
                                    {":protocol", "websocket"},
                                    {":scheme", "https"},
                                    {":authority", "example.com"},
                                    {":path", "/chat"}});
  pump();
  auto reqs = requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].stream_id, ws);
  EXPECT_EQ(reqs[0].protocol, "websocket");
  EXPECT_EQ(reqs[0].path, "/chat");
  EXPECT_EQ(status_seen(plain), 405) << "plain CONNECT stays refused";
  // The tunnel: 200, then bytes both ways on the stream.
  ASSERT_TRUE(server().submit_response(ws, 200, {}, true));
  ASSERT_TRUE(server().send_data(ws, "frame-from-server", false));
  pump();
  EXPECT_EQ(status_seen(ws), 200);
  EXPECT_EQ(peer_.streams[ws].body, "frame-from-server");
}

Fields big_headers(size_t count, size_t value_bytes) {
  Fields f = get_request();
  for (size_t i = 0; i < count; ++i)
    f.emplace_back("x-big-" + std::to_string(i), std::string(value_bytes, 'v'));
  return f;
}

TEST_F(ServerSessionTest, HeaderListTooLargeIsAnswered431AndCounted) {
  server();
  // 10 x 7 KiB: over 64 KiB in total, no single field near nghttp2's own cap.
  const int32_t big = peer_.request(big_headers(10, 7 * 1024));
  const int32_t after = peer_.request(get_request("/after"));
  pump();
  ASSERT_TRUE(ex_.fed.ok) << ex_.fed.error;
  EXPECT_EQ(status_seen(big), 431);
  EXPECT_EQ(server().counters().header_list_size, 1u);
  const auto trips = of<LimitTripped>(ex_.events);
  ASSERT_EQ(trips.size(), 1u);
  EXPECT_EQ(trips[0].limit, Limit::header_list_size);
  EXPECT_EQ(trips[0].stream_id, big);
  EXPECT_EQ(trips[0].detail.find("vvvv"), std::string::npos) << "no header value in the detail";
  // The connection goes on.
  ASSERT_EQ(requests().size(), 1u);
  EXPECT_EQ(requests()[0].stream_id, after);
}

TEST_F(ServerSessionTest, HeaderListJustUnderTheLimitPasses) {
  server();
  peer_.request(big_headers(8, 7 * 1024));  // 56 KiB + overhead
  pump();
  ASSERT_EQ(requests().size(), 1u);
  EXPECT_EQ(requests()[0].headers.size(), 8u);
  EXPECT_EQ(server().counters().header_list_size, 0u);
}

TEST_F(ServerSessionTest, ClientRespectingTheConcurrencyLimitIsServedInTurn) {
  ServerOptions options;
  options.limits.max_concurrent_streams = 5;
  start(options);
  pump();  // the client learns the limit from our SETTINGS first
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(peer_.request(get_request("/" + std::to_string(i))));
  for (int round = 0; round < 10; ++round) {
    pump();
    for (const auto& r : requests())
      if (peer_.streams[r.stream_id].headers.empty()) server().submit_response(r.stream_id, 204, {}, false);
  }
  pump();
  for (int32_t id : ids) EXPECT_EQ(status_seen(id), 204) << id;
  EXPECT_EQ(server().counters().concurrent_streams, 0u);
}

}  // namespace
}  // namespace zn::h2::test
