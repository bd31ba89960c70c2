// The head screen: a tripwire in the path, the query or a field, however
// escaped, is an alarm and a 403 whatever the verdict; the request's own
// placeholder is exempt; a screen that could not be armed refuses all.
#include "userspace/proxy/filters/head_screen_filter.h"

#include "filter_fixture.h"
#include "userspace/proxy/filters/target_filter.h"

namespace zn::proxy::filters {
namespace {

const std::string kCanary = "AKIAZNCANARY00001";

class HeadScreenFilterTest : public FilterTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(screen.arm({{kCanary, "canary:0"}, {kPlaceholder, "placeholder:stripe"}}));
  }
  FilterResult screened(Request& r) {
    EXPECT_TRUE(continues(TargetFilter().on_head(r, connection)));
    r.decision.host = "api.example.test";
    return HeadScreenFilter().on_head(r, connection);
  }
};

TEST_F(HeadScreenFilterTest, ACleanHeadGoesOn) {
  Request& r = get("/repos?q=AKIAZNCANARY0000", "X-Key: AKIAZNCANARY0000\r\n");
  EXPECT_TRUE(continues(screened(r)));
  EXPECT_EQ(counters.denied.load(), 0u);
}

TEST_F(HeadScreenFilterTest, ATripwireAnywhereInTheHeadIsAnAlarmAndARefusal) {
  struct Case {
    std::string target, fields, where;
  };
  const Case cases[] = {
      {"/x/" + kCanary, "", "path"},
      {"/x/AKIAZN%43ANARY00001", "", "path"},
      {"/x?k=" + kCanary, "", "query"},
      {"/x?k=%41KIAZNCANARY0000%31", "", "query"},
      {"/x", "X-Key: " + kCanary + "\r\n", "header"},
      {"/x", "Authorization: Basic QUtJQVpOQ0FOQVJZMDAwMDE=\r\n", "header"},
      {"/x", "X-Key: \\u0041KIAZNCANARY00001\r\n", "header"},
  };
  for (const Case& c : cases) {
    Request& r = get(c.target, c.fields);
    const FilterResult result = screened(r);
    ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse) << c.target << c.fields;
    EXPECT_EQ(result.refusal.status, 403);
    EXPECT_EQ(result.refusal.body, kTripwireRefusalBody);
    EXPECT_TRUE(result.audit_error.empty());  // the alarm is the record
    ASSERT_TRUE(result.alarm) << c.target << c.fields;
    EXPECT_EQ(result.alarm->labels, std::vector<std::string>{"canary:0"});
    EXPECT_EQ(result.alarm->where, std::vector<std::string>{c.where}) << c.target << c.fields;
    EXPECT_EQ(result.alarm->session, "user-1");
    EXPECT_EQ(result.alarm->host, "api.example.test");
  }
}

TEST_F(HeadScreenFilterTest, TheRequestsOwnPlaceholderIsExempt) {
  Request& r = get("/x", "Authorization: Bearer " + kPlaceholder + "\r\n");
  r.decision.substitutions.push_back(Substitution{kPlaceholder, "sk_live_x", "placeholder:stripe"});
  ASSERT_TRUE(continues(TargetFilter().on_head(r, connection)));
  EXPECT_TRUE(continues(HeadScreenFilter().on_head(r, connection)));
  // Positive control: the same head without the exemption.
  Request& again = get("/x", "Authorization: Bearer " + kPlaceholder + "\r\n");
  const FilterResult result = screened(again);
  ASSERT_TRUE(result.alarm);
  EXPECT_EQ(result.alarm->labels, std::vector<std::string>{"placeholder:stripe"});
}

TEST_F(HeadScreenFilterTest, AScreenThatCannotSeeRefusesEveryRequest) {
  connection.screen_blind = true;
  Request& r = get("/x");
  const FilterResult result = screened(r);
  EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.body, "zeroness: blocked by policy (tripwires cannot be screened)\n");
  EXPECT_FALSE(result.alarm);
}

TEST_F(HeadScreenFilterTest, NothingToScreenWithoutTripwires) {
  RequestScreen empty;
  Connection bare{facts, policy, counters, scrubber, empty};
  Request& r = get("/x/" + kCanary);
  ASSERT_TRUE(continues(TargetFilter().on_head(r, bare)));
  EXPECT_TRUE(continues(HeadScreenFilter().on_head(r, bare)));
}

}  // namespace
}  // namespace zn::proxy::filters
