// A response head's and trailers' fields scrubbed whatever the guest's codec
// (scrub_fields.h): each name, value and the reason phrase keep their length
// and place, a secret is redacted in whichever it is, also spelled by rule
// (percent-escaped, RFC 2231 continuations joined), and a head without one
// is left as it came (positive control).
#include "userspace/proxy/scrub_fields.h"

#include <gtest/gtest.h>

namespace zn::proxy {
namespace {

constexpr std::string_view kKey = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";

class ScrubFieldsTest : public ::testing::Test {
 protected:
  ScrubFieldsTest() { scrubber_.add_secret(kKey, "stripe"); }
  SecretScrubber scrubber_;
};

TEST_F(ScrubFieldsTest, ASecretInAValueANameOrTheReasonIsRedactedInPlace) {
  http::ResponseHead head;
  head.status = 200;
  head.reason = "OK " + std::string(kKey);
  head.headers = {{"x-echo", "Bearer " + std::string(kKey)},
                  {"x-" + std::string(kKey), "1"},
                  {"content-type", "text/plain"}};
  const ScrubReport r = scrub_head(scrubber_, head);
  EXPECT_EQ(r.matches, 3u);
  EXPECT_EQ(head.reason.size(), 3 + kKey.size());
  EXPECT_EQ(head.reason.find(kKey), std::string::npos);
  EXPECT_EQ(head.headers[0].value.substr(0, 7), "Bearer ");
  EXPECT_EQ(head.headers[0].value.size(), 7 + kKey.size());
  EXPECT_EQ(head.headers[0].value.find(kKey), std::string::npos);
  EXPECT_EQ(head.headers[1].name.find(kKey), std::string::npos);
  EXPECT_EQ(head.headers[1].value, "1");
  EXPECT_EQ(head.headers[2].name, "content-type");  // untouched around them
  EXPECT_EQ(head.headers[2].value, "text/plain");
}

TEST_F(ScrubFieldsTest, SpellingsByRuleAndJoinedContinuationsAreFound) {
  const std::string s(kKey);
  http::ResponseHead head;
  head.status = 302;
  head.headers = {// every byte of the secret percent-escaped, lower-case hex
                  {"location", "/x?k=%73%6b_live_4eC39HqLyjWDarjtT1zdp7dc"},
                  // RFC 2231 continuations: the secret only when the two are joined
                  {"content-disposition",
                   "attachment; filename*0*=UTF-8''" + s.substr(0, 16) + "; filename*1*=" + s.substr(16)}};
  const ScrubReport r = scrub_head(scrubber_, head);
  EXPECT_GE(r.matches, 2u);
  EXPECT_EQ(head.headers[0].value.find("_live_4eC39HqLyjWDarjtT1zdp7dc"), std::string::npos);
  EXPECT_EQ(head.headers[1].value.find(s.substr(16)), std::string::npos);
}

TEST_F(ScrubFieldsTest, TrailersAreScrubbedLikeAHead) {
  std::vector<http::Header> trailers = {{"grpc-message", "bad key " + std::string(kKey)},
                                        {"grpc-status", "16"}};
  EXPECT_EQ(scrub_fields(scrubber_, trailers).matches, 1u);
  EXPECT_EQ(trailers[0].value.find(kKey), std::string::npos);
  EXPECT_EQ(trailers[0].value.size(), 8 + kKey.size());
  EXPECT_EQ(trailers[1].value, "16");
}

TEST_F(ScrubFieldsTest, AHeadWithoutASecretIsLeftAsItCame) {
  http::ResponseHead head;
  head.status = 200;
  head.reason = "OK";
  head.headers = {{"x-a", "sk_live_not_the_key"}, {"content-type", "application/json"}};
  const http::ResponseHead before = head;
  EXPECT_EQ(scrub_head(scrubber_, head).matches, 0u);
  EXPECT_EQ(head.reason, before.reason);
  ASSERT_EQ(head.headers.size(), 2u);
  EXPECT_EQ(head.headers[0].value, before.headers[0].value);
  SecretScrubber unarmed;
  head.headers[0].value = std::string(kKey);
  EXPECT_EQ(scrub_head(unarmed, head).matches, 0u);  // nothing to find on an unarmed connection
  EXPECT_EQ(head.headers[0].value, kKey);
}

}  // namespace
}  // namespace zn::proxy
