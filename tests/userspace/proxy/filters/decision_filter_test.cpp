// The policy decision: one trip to the broker with every fact it decides on,
// after the body's first bytes are in; the session's tripwires armed once.
#include "userspace/proxy/filters/decision_filter.h"

#include "filter_fixture.h"
#include "userspace/proxy/filters/target_filter.h"

namespace zn::proxy::filters {
namespace {

// The broker's answer on a session with one tripwire: allowed.
std::function<RequestDecision(const RequestFacts&)> allowed_with_tripwire(Tripwire tripwire) {
  return [tripwire](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.tripwires = {tripwire};
    return d;
  };
}

class DecisionFilterTest : public FilterTest {
 protected:
  Request& normalised(Request& r) {
    EXPECT_TRUE(continues(TargetFilter().on_head(r, connection)));
    return r;
  }
};

TEST_F(DecisionFilterTest, OneTripWithEveryFact) {
  Request& r = normalised(get("/a/../repos?x=1", "X-Api-Key: k\r\nAccept: */*\r\n"));
  ASSERT_TRUE(continues(DecisionFilter().on_head(r, connection)));
  ASSERT_EQ(policy.requests.size(), 1u);
  const RequestFacts& f = policy.requests[0];
  EXPECT_EQ(f.session, "user-1");
  EXPECT_EQ(f.sni, "api.example.test");
  EXPECT_EQ(f.port, 443);
  EXPECT_EQ(f.host_header, "api.example.test");
  EXPECT_EQ(f.method, "GET");
  EXPECT_EQ(f.path, "/repos");
  EXPECT_FALSE(f.websocket);
  EXPECT_TRUE(f.want_session_secrets);
  EXPECT_EQ(f.header_names, (std::vector<std::string>{"host", "x-api-key", "accept"}));
  EXPECT_TRUE(f.body_preview.empty());
  EXPECT_TRUE(r.decided);
  EXPECT_TRUE(r.decision.allow);
  EXPECT_EQ(counters.requests.load(), 1u);
  // Run again (as after another filter's I/O): no second trip.
  ASSERT_TRUE(continues(DecisionFilter().on_head(r, connection)));
  EXPECT_EQ(policy.requests.size(), 1u);
}

TEST_F(DecisionFilterTest, PlainHttpHasNoSni) {
  facts.tls = false;
  facts.port = 80;
  Request& r = normalised(get("/"));
  ASSERT_TRUE(continues(DecisionFilter().on_head(r, connection)));
  ASSERT_EQ(policy.requests.size(), 1u);
  EXPECT_FALSE(policy.requests[0].sni);
  EXPECT_EQ(policy.requests[0].port, 80);
}

TEST_F(DecisionFilterTest, ABodyIsPreviewedBeforeTheBrokerIsAsked) {
  Request& r = normalised(
      request("POST /charges HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_EQ(DecisionFilter().on_head(r, connection).kind, FilterResult::Kind::kNeedPreview);
  EXPECT_TRUE(policy.requests.empty());
  EXPECT_EQ(counters.requests.load(), 0u);
  r.body_preview = "hello";
  ASSERT_TRUE(continues(DecisionFilter().on_head(r, connection)));
  ASSERT_EQ(policy.requests.size(), 1u);
  EXPECT_EQ(policy.requests[0].body_preview, "hello");
}

TEST_F(DecisionFilterTest, TheSessionsSecretsAreAskedForUntilLoaded) {
  connection.session_secrets_loaded = true;
  Request& r = normalised(get("/"));
  ASSERT_TRUE(continues(DecisionFilter().on_head(r, connection)));
  EXPECT_FALSE(policy.requests[0].want_session_secrets);
}

TEST_F(DecisionFilterTest, TheSessionsTripwiresAreArmedOnce) {
  policy.verdict = allowed_with_tripwire({"AKIAZNCANARY00001", "canary:0"});
  Request& first = normalised(get("/"));
  ASSERT_TRUE(continues(DecisionFilter().on_head(first, connection)));
  EXPECT_TRUE(connection.tripwires_loaded);
  EXPECT_TRUE(screen.armed());
  EXPECT_FALSE(connection.screen_blind);
  EXPECT_EQ(screen.check("x AKIAZNCANARY00001 y", {}), std::vector<std::string>{"canary:0"});
  // Positive control for "once": a second request's list is not armed again.
  policy.verdict = allowed_with_tripwire({"AKIAZNCANARY00002", "canary:1"});
  Request& second = normalised(get("/"));
  ASSERT_TRUE(continues(DecisionFilter().on_head(second, connection)));
  EXPECT_TRUE(screen.check("x AKIAZNCANARY00002 y", {}).empty());
}

}  // namespace
}  // namespace zn::proxy::filters
