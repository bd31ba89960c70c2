// The request body's filters: the screen asks for the body when the session
// has tripwires or placeholders, refuses a tripwire in it however spelled or
// coded (and anything it could not read), and lets the request's own
// placeholder by; the swap puts the credential in a JSON or form body read
// whole, in a coded one's decoded bytes, and nowhere else. Each refusal
// beside its positive control.
#include "userspace/proxy/filters/body_screen_filter.h"
#include "userspace/proxy/filters/body_swap_filter.h"

#include "filter_fixture.h"
#include "support/deflated.h"
#include "userspace/proxy/filters/target_filter.h"

namespace zn::proxy::filters {
namespace {

const std::string kBodyCanary = "AKIAZNCANARY00001";
const std::string kCredential = "sk_live_\"quoted\"&more";

class BodyFiltersTest : public FilterTest {
 protected:
  // A POST with `body` framed by its length, normalised, allowed.
  Request& post(const std::string& body, const std::string& fields = "") {
    Request& r = request("POST /charges HTTP/1.1\r\nHost: api.example.test\r\n" + fields +
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_TRUE(continues(TargetFilter().on_head(r, connection)));
    r.decision.allow = true;
    r.decision.host = "api.example.test";
    return r;
  }
  // What the exchange does for kNeedBody: the body as read, whole.
  static void read(Request& r, const std::string& body) {
    r.body = body;
    r.body_read = true;
    r.body_whole = true;
  }
  FilterResult screen_body(Request& r, const std::string& body) {
    const FilterResult first = BodyScreenFilter().on_head(r, connection);
    EXPECT_EQ(first.kind, FilterResult::Kind::kNeedBody);
    read(r, body);
    return BodyScreenFilter().on_head(r, connection);
  }
  void arm() { ASSERT_TRUE(screen.arm({{kBodyCanary, "canary:0"}, {kPlaceholder, "placeholder:stripe"}})); }
  static Substitution swap() { return Substitution{kPlaceholder, kCredential, "placeholder:stripe"}; }
};

TEST_F(BodyFiltersTest, NothingToScreenForReadsNoBody) {
  Request& r = post("hello");
  EXPECT_TRUE(continues(BodyScreenFilter().on_head(r, connection)));
  EXPECT_FALSE(r.body_read);
  // Positive control: the same request on a session with tripwires.
  arm();
  Request& armed = post("hello");
  EXPECT_EQ(BodyScreenFilter().on_head(armed, connection).kind, FilterResult::Kind::kNeedBody);
  EXPECT_EQ(armed.body_limit, kMaxSwappedBody);
  // A request without a body is never read, armed or not.
  Request& bodiless = get("/");
  EXPECT_TRUE(continues(BodyScreenFilter().on_head(bodiless, connection)));
}

TEST_F(BodyFiltersTest, APlaceholderAloneIsReasonToRead) {
  Request& r = post("{\"key\":\"" + kPlaceholder + "\"}");
  r.decision.substitutions.push_back(swap());
  EXPECT_EQ(BodyScreenFilter().on_head(r, connection).kind, FilterResult::Kind::kNeedBody);
}

TEST_F(BodyFiltersTest, ACodedBodyIsReadWithinItsOwnBound) {
  arm();
  Request& r = post("x", "Content-Encoding: gzip\r\n");
  EXPECT_EQ(BodyScreenFilter().on_head(r, connection).kind, FilterResult::Kind::kNeedBody);
  EXPECT_EQ(r.body_limit, kMaxCodedBody);
}

TEST_F(BodyFiltersTest, ATripwireInTheBodyIsAnAlarmAndARefusalHoweverSpelled) {
  arm();
  const std::string spellings[] = {
      "token=" + kBodyCanary,
      "token=%41KIAZNCANARY0000%31",
      "{\"t\":\"\\u0041KIAZNCANARY00001\"}",
      "QUtJQVpOQ0FOQVJZMDAwMDE=",
      std::string("A\0K\0I\0A\0Z\0N\0C\0A\0N\0A\0R\0Y\0000\0000\0000\0000\0001\0", 34),
  };
  for (const std::string& body : spellings) {
    Request& r = post(body);
    const FilterResult result = screen_body(r, body);
    ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse) << body;
    EXPECT_EQ(result.refusal.status, 403);
    EXPECT_EQ(result.refusal.body, kTripwireRefusalBody);
    EXPECT_EQ(result.audit_error, "tripwire in body");
    ASSERT_TRUE(result.alarm);
    EXPECT_EQ(result.alarm->labels, std::vector<std::string>{"canary:0"});
    EXPECT_EQ(result.alarm->where, std::vector<std::string>{"body"});
    EXPECT_EQ(result.alarm->host, "api.example.test");
    EXPECT_EQ(result.alarm->path, "/charges");
  }
  EXPECT_EQ(counters.denied.load(), std::size(spellings));
  // Positive control: a body one byte short of the canary goes on.
  Request& clean = post("token=AKIAZNCANARY0000");
  EXPECT_TRUE(continues(screen_body(clean, "token=AKIAZNCANARY0000")));
}

TEST_F(BodyFiltersTest, ACodedBodyIsScreenedAsTheUpstreamWillReadIt) {
  arm();
  for (const auto& [coding, bits] : {std::pair{"gzip", 31}, std::pair{"deflate", 15}}) {
    const std::string coded = test::deflated("token=" + kBodyCanary, bits);
    ASSERT_EQ(coded.find(kBodyCanary), std::string::npos);  // invisible as sent
    Request& r = post(coded, std::string("Content-Encoding: ") + coding + "\r\n");
    const FilterResult result = screen_body(r, coded);
    ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse) << coding;
    ASSERT_TRUE(result.alarm);
    EXPECT_EQ(result.audit_error, "tripwire in body");
    // Positive control: the same coding of a clean body goes on, decoded.
    const std::string clean = test::deflated("token=nothing", bits);
    Request& ok = post(clean, std::string("Content-Encoding: ") + coding + "\r\n");
    EXPECT_TRUE(continues(screen_body(ok, clean))) << coding;
    ASSERT_TRUE(ok.decoded_body);
    EXPECT_EQ(ok.decoded_body->bytes, "token=nothing");
  }
}

TEST_F(BodyFiltersTest, WhatCannotBeScreenedDoesNotGo) {
  arm();
  // Longer than the bound of a coded body: 413.
  const std::string coded = test::deflated("token=nothing", 31);
  Request& partial = post(coded, "Content-Encoding: gzip\r\n");
  ASSERT_EQ(BodyScreenFilter().on_head(partial, connection).kind, FilterResult::Kind::kNeedBody);
  partial.body = coded;
  partial.body_read = true;  // not whole
  FilterResult result = BodyScreenFilter().on_head(partial, connection);
  ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 413);
  EXPECT_EQ(result.audit_error, "request body with a content coding too large to screen");
  // Corrupt: 400; a coding the proxy cannot read: 415.
  Request& corrupt = post("not gzip at all", "Content-Encoding: gzip\r\n");
  result = screen_body(corrupt, "not gzip at all");
  ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 400);
  Request& unknown = post("abc", "Content-Encoding: compress\r\n");
  result = screen_body(unknown, "abc");
  ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 415);
  EXPECT_FALSE(result.audit_error.empty());
}

TEST_F(BodyFiltersTest, AStreamedBodyIsLeftToTheStreamScreen) {
  arm();
  Request& r = post("token=");
  ASSERT_EQ(BodyScreenFilter().on_head(r, connection).kind, FilterResult::Kind::kNeedBody);
  r.body = "token=";
  r.body_read = true;  // past the bound: the rest streams, screened as it goes
  EXPECT_TRUE(continues(BodyScreenFilter().on_head(r, connection)));
}

TEST_F(BodyFiltersTest, TheRequestsOwnPlaceholderIsExemptInTheBody) {
  arm();
  const std::string body = "{\"key\":\"" + kPlaceholder + "\"}";
  Request& r = post(body, "Content-Type: application/json\r\n");
  r.decision.substitutions.push_back(swap());
  EXPECT_TRUE(continues(screen_body(r, body)));
  // Positive control: without the exemption it is a tripwire.
  Request& other = post(body, "Content-Type: application/json\r\n");
  const FilterResult result = screen_body(other, body);
  ASSERT_TRUE(result.alarm);
  EXPECT_EQ(result.alarm->labels, std::vector<std::string>{"placeholder:stripe"});
}

TEST_F(BodyFiltersTest, APlaceholderIsSwappedInAJsonOrFormBodyEncodedForIt) {
  Request& json = post("", "Content-Type: application/json\r\n");
  json.decision.substitutions.push_back(swap());
  read(json, "{\"key\":\"" + kPlaceholder + "\"}");
  ASSERT_TRUE(continues(BodySwapFilter().on_head(json, connection)));
  EXPECT_EQ(json.body, "{\"key\":\"sk_live_\\\"quoted\\\"&more\"}");
  Request& form = post("", "Content-Type: application/x-www-form-urlencoded\r\n");
  form.decision.substitutions.push_back(swap());
  read(form, "key=" + kPlaceholder);
  ASSERT_TRUE(continues(BodySwapFilter().on_head(form, connection)));
  EXPECT_EQ(form.body, "key=sk_live_%22quoted%22%26more");
  // Neither JSON nor a form: as it came.
  Request& text = post("", "Content-Type: text/plain\r\n");
  text.decision.substitutions.push_back(swap());
  read(text, "key=" + kPlaceholder);
  ASSERT_TRUE(continues(BodySwapFilter().on_head(text, connection)));
  EXPECT_EQ(text.body, "key=" + kPlaceholder);
}

TEST_F(BodyFiltersTest, ACodedBodyIsSwappedDecodedAndCodedAgain) {
  arm();
  const std::string plain = "{\"key\":\"" + kPlaceholder + "\"}";
  const std::string coded = test::deflated(plain, 31);
  Request& r = post(coded, "Content-Type: application/json\r\nContent-Encoding: gzip\r\n");
  r.decision.substitutions.push_back(swap());
  ASSERT_TRUE(continues(screen_body(r, coded)));
  ASSERT_TRUE(continues(BodySwapFilter().on_head(r, connection)));
  EXPECT_EQ(test::inflated(r.body, 31), "{\"key\":\"sk_live_\\\"quoted\\\"&more\"}");
  // Positive control: without the rule's placeholder, the body goes as sent.
  Request& other = post(coded, "Content-Type: application/json\r\nContent-Encoding: gzip\r\n");
  ASSERT_TRUE(continues(BodySwapFilter().on_head(other, connection)));
  EXPECT_EQ(other.body, "");  // never read: nothing to screen for, nothing swapped
}

TEST_F(BodyFiltersTest, AStreamedBodyIsNeverSwapped) {
  Request& r = post("", "Content-Type: application/json\r\n");
  r.decision.substitutions.push_back(swap());
  r.body = "{\"key\":\"" + kPlaceholder;
  r.body_read = true;  // not whole
  ASSERT_TRUE(continues(BodySwapFilter().on_head(r, connection)));
  EXPECT_EQ(r.body, "{\"key\":\"" + kPlaceholder);
}

}  // namespace
}  // namespace zn::proxy::filters
