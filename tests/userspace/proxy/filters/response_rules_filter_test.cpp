// On a scrubbed connection nothing the scrubber cannot read whole goes back
// to the guest: no compressed body, no part of one. Elsewhere both pass.
#include "userspace/proxy/filters/response_rules_filter.h"

#include "filter_fixture.h"

namespace zn::proxy::filters {
namespace {

class ResponseRulesFilterTest : public FilterTest {
 protected:
  http::ResponseHead response(const std::string& bytes, bool head_request = false) {
    http::ResponseHead out;
    const http::ParseResult r = http::parse_response_head(bytes, http::HttpLimits{}, head_request, out);
    EXPECT_EQ(r.state, http::ParseState::kDone) << r.error;
    return out;
  }
};

const std::string kGzip = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 20\r\n\r\n";
const std::string kPart =
    "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/100\r\nContent-Length: 10\r\n\r\n";
const std::string kParts =
    "HTTP/1.1 206 Partial Content\r\nContent-Type: multipart/byteranges; boundary=b\r\n"
    "Content-Length: 200\r\n\r\n";

TEST_F(ResponseRulesFilterTest, AnUnscrubbedConnectionTakesAnyResponse) {
  for (const std::string& head : {kGzip, kPart, kParts})
    EXPECT_TRUE(continues(ResponseRulesFilter().on_response_head(response(head), connection))) << head;
}

TEST_F(ResponseRulesFilterTest, AScrubbedConnectionRefusesWhatItCannotReadWhole) {
  ASSERT_TRUE(scrubber.add_secret("sk_live_0123456789abcdef", "stripe"));
  for (const std::string& head :
       {kGzip, kPart, kParts,
        std::string("HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nTransfer-Encoding: chunked\r\n\r\n")}) {
    const FilterResult r = ResponseRulesFilter().on_response_head(response(head), connection);
    EXPECT_EQ(r.kind, FilterResult::Kind::kRefuse) << head;
    EXPECT_EQ(r.refusal.status, 502) << head;
    EXPECT_FALSE(r.audit_error.empty()) << head;
  }
  // Positive controls: a plain body, and no body at all under a coding.
  EXPECT_TRUE(continues(ResponseRulesFilter().on_response_head(
      response("HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n"), connection)));
  EXPECT_TRUE(continues(ResponseRulesFilter().on_response_head(
      response("HTTP/1.1 304 Not Modified\r\nContent-Encoding: gzip\r\n\r\n"), connection)));
}

}  // namespace
}  // namespace zn::proxy::filters
