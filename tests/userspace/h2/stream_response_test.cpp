// An upstream's HTTP/1.1 response as the answer on a guest's HTTP/2
// stream: what is dropped (each hop-by-hop field, and those Connection
// names), how the length is carried, when DATA follows; and a real nghttp2
// client accepting the result.
#include <gtest/gtest.h>

#include <string>

#include "session_fixture.h"
#include "userspace/h2/stream_response.h"

namespace zn::h2::test {
namespace {

http::ResponseHead parse(const std::string& head, bool request_was_head = false) {
  http::ResponseHead r;
  const http::ParseResult p = http::parse_response_head(head, {}, request_was_head, r);
  EXPECT_EQ(p.state, http::ParseState::kDone) << p.error;
  return r;
}

int count(const std::vector<Field>& fields, const std::string& name) {
  int n = 0;
  for (const Field& f : fields) n += f.name == name;
  return n;
}

std::string value(const std::vector<Field>& fields, const std::string& name) {
  for (const Field& f : fields)
    if (f.name == name) return f.value;
  return "<absent>";
}

TEST(StreamResponse, NamesAreLowerCasedAndEndToEndFieldsKeptInOrder) {
  const StreamResponse r = to_h2_response_fields(
      parse("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Request-Id: 7\r\nSet-Cookie: a=1\r\n"
            "Set-Cookie: b=2\r\nContent-Length: 4\r\n\r\n"));
  ASSERT_EQ(r.error, nullptr);
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.headers.size(), 5u);
  EXPECT_EQ(r.headers[0].name, "content-type");
  EXPECT_EQ(r.headers[1].name, "x-request-id");
  EXPECT_EQ(r.headers[2].name, "set-cookie");  // never joined
  EXPECT_EQ(r.headers[2].value, "a=1");
  EXPECT_EQ(r.headers[3].value, "b=2");
  EXPECT_EQ(r.headers[4].name, "content-length");
  EXPECT_EQ(r.headers[4].value, "4");
}

// Each hop-by-hop field, on its own, beside a field that stays.
TEST(StreamResponse, EachHopByHopFieldIsDropped) {
  for (const char* field : {"Connection: keep-alive", "Keep-Alive: timeout=5", "Proxy-Connection: keep-alive",
                            "Upgrade: h2c", "TE: trailers", "Trailer: X-Checksum", "Connection: close"}) {
    const StreamResponse r = to_h2_response_fields(
        parse(std::string("HTTP/1.1 200 OK\r\n") + field + "\r\nX-Stays: 1\r\nContent-Length: 0\r\n\r\n"));
    ASSERT_EQ(r.error, nullptr) << field;
    ASSERT_EQ(r.headers.size(), 2u) << field;
    EXPECT_EQ(r.headers[0].name, "x-stays") << field;
    EXPECT_EQ(r.headers[1].name, "content-length") << field;
  }
  const StreamResponse chunked =
      to_h2_response_fields(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Stays: 1\r\n\r\n"));
  ASSERT_EQ(chunked.error, nullptr);
  ASSERT_EQ(chunked.headers.size(), 1u);
  EXPECT_EQ(chunked.headers[0].name, "x-stays");
}

TEST(StreamResponse, FieldsConnectionNamesAreDropped) {
  const StreamResponse r = to_h2_response_fields(
      parse("HTTP/1.1 200 OK\r\nConnection: x-foo, X-Bar\r\nX-Foo: secret-ish\r\nx-bar: 2\r\nX-Baz: 3\r\n"
            "Content-Length: 0\r\n\r\n"));
  ASSERT_EQ(r.error, nullptr);
  EXPECT_EQ(count(r.headers, "x-foo"), 0);
  EXPECT_EQ(count(r.headers, "x-bar"), 0);
  EXPECT_EQ(count(r.headers, "connection"), 0);
  EXPECT_EQ(value(r.headers, "x-baz"), "3");
  // Without the Connection field they stay.
  const StreamResponse control =
      to_h2_response_fields(parse("HTTP/1.1 200 OK\r\nX-Foo: 1\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_EQ(value(control.headers, "x-foo"), "1");
}

TEST(StreamResponse, TheLengthIsKeptOnlyWhenItFramedTheBodyOrIsMetadata) {
  // Framed by its length: one, regenerated.
  const StreamResponse sized = to_h2_response_fields(parse("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n"));
  EXPECT_EQ(count(sized.headers, "content-length"), 1);
  EXPECT_EQ(value(sized.headers, "content-length"), "12");
  // Identical duplicates HTTP/1.1 tolerates become one.
  const StreamResponse dup =
      to_h2_response_fields(parse("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Length: 12\r\n\r\n"));
  EXPECT_EQ(count(dup.headers, "content-length"), 1);
  // Chunked or read to the close: no length.
  EXPECT_EQ(
      count(to_h2_response_fields(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")).headers,
            "content-length"),
      0);
  EXPECT_EQ(
      count(to_h2_response_fields(parse("HTTP/1.0 200 OK\r\nX-A: 1\r\n\r\n")).headers, "content-length"), 0);
  // A HEAD's and a 304's length describe the resource: kept, once.
  const StreamResponse head = to_h2_response_fields(parse(
      "HTTP/1.1 200 OK\r\nContent-Length: 500\r\nContent-Length: 500\r\n\r\n", /*request_was_head=*/true));
  EXPECT_EQ(count(head.headers, "content-length"), 1);
  EXPECT_EQ(value(head.headers, "content-length"), "500");
  const StreamResponse not_modified =
      to_h2_response_fields(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 500\r\nETag: \"x\"\r\n\r\n"));
  EXPECT_EQ(value(not_modified.headers, "content-length"), "500");
}

TEST(StreamResponse, InterimAndSwitchingResponsesCannotBeRelayed) {
  EXPECT_NE(
      to_h2_response_fields(parse("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")).error,
      nullptr);
  EXPECT_NE(to_h2_response_fields(parse("HTTP/1.1 100 Continue\r\n\r\n")).error, nullptr);
  EXPECT_EQ(to_h2_response_fields(parse("HTTP/1.1 204 No Content\r\n\r\n")).error, nullptr);
}

TEST(StreamResponse, BodiesFollowOnlyWhereHttpAllowsThem) {
  const http::ResponseHead sized = parse("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n");
  EXPECT_TRUE(h2_has_body(sized, "GET"));
  EXPECT_FALSE(h2_has_body(sized, "HEAD"));
  EXPECT_FALSE(h2_has_body(parse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), "GET"));
  EXPECT_TRUE(h2_has_body(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), "GET"));
  EXPECT_TRUE(h2_has_body(parse("HTTP/1.1 200 OK\r\n\r\n"), "POST"));  // to the close
  EXPECT_FALSE(h2_has_body(parse("HTTP/1.1 204 No Content\r\n\r\n"), "GET"));
  EXPECT_FALSE(h2_has_body(parse("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n"), "GET"));
  EXPECT_FALSE(h2_has_body(parse("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true), "HEAD"));
  // A head built by hand that claims a body on a 204 still gets none.
  http::ResponseHead lying = sized;
  lying.status = 204;
  EXPECT_FALSE(h2_has_body(lying, "GET"));
  lying.status = 103;
  EXPECT_FALSE(h2_has_body(lying, "GET"));
}

// The mapped answer, sent by H2ServerSession to a real nghttp2 client: it
// is accepted, and the client sees exactly the end-to-end fields.
TEST(StreamResponse, ARealClientAcceptsTheMappedAnswer) {
  H2ServerSession server;
  NgPeer client{NgPeer::Role::kClient};
  ServerExchange ex;
  const int32_t get_id = client.request(get_request("/a"));
  Fields head_req = get_request("/b");
  head_req[0].second = "HEAD";
  const int32_t head_id = client.request(head_req);
  ex.pump(server, client);
  ASSERT_EQ(of<RequestHeaders>(ex.events).size(), 2u);

  const http::ResponseHead upstream = parse(
      "HTTP/1.1 200 OK\r\nConnection: x-foo\r\nX-Foo: 1\r\nKeep-Alive: timeout=5\r\nContent-Type: "
      "text/plain\r\n"
      "Content-Length: 5\r\n\r\n");
  const StreamResponse answer = to_h2_response_fields(upstream);
  ASSERT_EQ(answer.error, nullptr);
  ASSERT_TRUE(server.submit_response(get_id, answer.status, answer.headers, h2_has_body(upstream, "GET")));
  ASSERT_TRUE(server.send_data(get_id, "hello", true));

  const http::ResponseHead upstream_head = parse("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true);
  const StreamResponse head_answer = to_h2_response_fields(upstream_head);
  ASSERT_TRUE(server.submit_response(head_id, head_answer.status, head_answer.headers,
                                     h2_has_body(upstream_head, "HEAD")));
  ex.pump(server, client);
  ASSERT_TRUE(ex.fed.ok) << ex.fed.error;

  const NgPeer::StreamSeen& got = client.streams[get_id];
  EXPECT_TRUE(got.ended);
  EXPECT_FALSE(got.rst_received.has_value());
  EXPECT_EQ(got.body, "hello");
  EXPECT_EQ(find_field(got.headers, ":status"), "200");
  EXPECT_EQ(find_field(got.headers, "content-type"), "text/plain");
  EXPECT_EQ(find_field(got.headers, "content-length"), "5");
  EXPECT_EQ(find_field(got.headers, "x-foo"), "");
  EXPECT_EQ(find_field(got.headers, "keep-alive"), "");
  EXPECT_EQ(got.headers.size(), 3u);
  const NgPeer::StreamSeen& got_head = client.streams[head_id];
  EXPECT_TRUE(got_head.ended);
  EXPECT_FALSE(got_head.rst_received.has_value());
  EXPECT_EQ(find_field(got_head.headers, "content-length"), "5");
  EXPECT_TRUE(got_head.body.empty());
}

}  // namespace
}  // namespace zn::h2::test
