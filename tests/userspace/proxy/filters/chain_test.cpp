// The chain: the order declared once, run until a filter stops, resumed at
// that filter after its I/O; a refusal ends it before any later filter.
#include "userspace/proxy/filters/chain.h"

#include "filter_fixture.h"

namespace zn::proxy::filters {
namespace {

class ChainTest : public FilterTest {};

std::vector<std::string_view> names(const HeadChain& chain) {
  std::vector<std::string_view> out;
  for (const HeadFilter* f : chain.filters()) out.push_back(f->name());
  return out;
}

TEST_F(ChainTest, TheOrderIsDeclaredOnce) {
  EXPECT_EQ(names(head_chain()),
            (std::vector<std::string_view>{"target", "upgrade", "local service", "decision", "head screen",
                                           "session secrets", "verdict", "approval", "body screen",
                                           "body swap", "placeholders", "identity"}));
  ASSERT_EQ(response_chain().filters().size(), 1u);
  EXPECT_EQ(response_chain().filters()[0]->name(), "range and encoding rules");
}

TEST_F(ChainTest, AnAllowedRequestGoesThroughEveryFilter) {
  Request& r = get("/repos");
  const ChainStop stop = head_chain().run(r, connection);
  EXPECT_EQ(stop.result.kind, FilterResult::Kind::kContinue);
  EXPECT_EQ(stop.at, head_chain().filters().size());
  EXPECT_EQ(policy.requests.size(), 1u);
  EXPECT_TRUE(r.decision.allow);
}

TEST_F(ChainTest, StopsForIoAndResumesAtTheFilterThatAsked) {
  policy.verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.hold_ticket = 3;
    return d;
  };
  Request& r = request("POST /charges HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 2\r\n\r\nhi");
  ChainStop stop = head_chain().run(r, connection);
  ASSERT_EQ(stop.result.kind, FilterResult::Kind::kNeedPreview);
  EXPECT_EQ(head_chain().filters()[stop.at]->name(), "decision");
  r.body_preview = "hi";
  stop = head_chain().run(r, connection, stop.at);
  ASSERT_EQ(stop.result.kind, FilterResult::Kind::kHold);
  EXPECT_EQ(head_chain().filters()[stop.at]->name(), "approval");
  r.hold = HoldState{HoldOutcome::kApproved, ""};
  stop = head_chain().run(r, connection, stop.at);
  EXPECT_EQ(stop.result.kind, FilterResult::Kind::kContinue);
  EXPECT_EQ(policy.requests.size(), 1u);  // one trip, however often it stopped
}

TEST_F(ChainTest, ARefusalEndsTheChain) {
  // Refused before the broker: it is never asked.
  Request& bad = get("/a%2Fb");
  ChainStop stop = head_chain().run(bad, connection);
  EXPECT_EQ(stop.result.kind, FilterResult::Kind::kRefuse);
  EXPECT_TRUE(policy.requests.empty());
  // Refused by the broker: a hold it asked for is never waited for.
  policy.verdict = [](const RequestFacts&) {
    RequestDecision d;
    d.allow = false;
    d.status = 403;
    d.reason = "default deny";
    d.hold_ticket = 9;
    return d;
  };
  Request& denied = get("/x");
  stop = head_chain().run(denied, connection);
  EXPECT_EQ(stop.result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(head_chain().filters()[stop.at]->name(), "verdict");
}

}  // namespace
}  // namespace zn::proxy::filters
