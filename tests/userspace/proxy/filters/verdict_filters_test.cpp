// The verdict's consequences: the session's secrets armed on the first
// allowed request, a refusal answered with the broker's status and reason,
// a held request waited for and then let go or refused.
#include "filter_fixture.h"
#include "userspace/proxy/filters/approval_filter.h"
#include "userspace/proxy/filters/session_secrets_filter.h"
#include "userspace/proxy/filters/verdict_filter.h"

namespace zn::proxy::filters {
namespace {

class VerdictFiltersTest : public FilterTest {};

TEST_F(VerdictFiltersTest, TheSessionsSecretsAreArmedOnTheFirstAllowedRequest) {
  Request& denied = get("/");
  denied.decision.allow = false;
  denied.decision.session_secrets = {{"stripe", "sk_live_0123456789abcdef"}};
  ASSERT_TRUE(continues(SessionSecretsFilter().on_head(denied, connection)));
  EXPECT_FALSE(scrubber.armed());  // a refused request is given none
  EXPECT_FALSE(connection.session_secrets_loaded);

  Request& allowed = get("/");
  allowed.decision.allow = true;
  allowed.decision.session_secrets = {{"stripe", "sk_live_0123456789abcdef"}};
  ASSERT_TRUE(continues(SessionSecretsFilter().on_head(allowed, connection)));
  EXPECT_TRUE(scrubber.armed());
  EXPECT_TRUE(connection.session_secrets_loaded);
  std::string echoed = "token=sk_live_0123456789abcdef";
  EXPECT_EQ(scrubber.scrub(echoed).matches, 1u);
  EXPECT_EQ(echoed.find("sk_live"), std::string::npos);
}

TEST_F(VerdictFiltersTest, AnAllowedRequestGoesOn) {
  Request& r = get("/");
  r.decision.allow = true;
  EXPECT_TRUE(continues(VerdictFilter().on_head(r, connection)));
  EXPECT_EQ(counters.denied.load(), 0u);
}

TEST_F(VerdictFiltersTest, ARefusalCarriesTheBrokersStatusAndReason) {
  struct Case {
    int status;
    std::string reason, body;
  };
  const Case cases[] = {
      {403, "default deny", "zeroness: blocked by policy (default deny)\n"},
      {421, "Host does not match SNI", "zeroness: blocked by policy (Host does not match SNI)\n"},
      {429, "session rate", "zeroness: rate limited (session rate)\n"},
  };
  for (const Case& c : cases) {
    Request& r = get("/");
    r.decision.allow = false;
    r.decision.status = c.status;
    r.decision.reason = c.reason;
    const FilterResult result = VerdictFilter().on_head(r, connection);
    EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse);
    EXPECT_EQ(result.refusal.status, c.status);
    EXPECT_EQ(result.refusal.body, c.body);
    EXPECT_TRUE(result.audit_error.empty());  // the broker audited it
  }
  EXPECT_EQ(counters.denied.load(), 3u);
}

TEST_F(VerdictFiltersTest, AHeldRequestWaitsThenGoesOrIsRefused) {
  Request& none = get("/");
  EXPECT_TRUE(continues(ApprovalFilter().on_head(none, connection)));

  Request& approved = get("/");
  approved.decision.hold_ticket = 7;
  EXPECT_EQ(ApprovalFilter().on_head(approved, connection).kind, FilterResult::Kind::kHold);
  approved.hold = HoldState{HoldOutcome::kApproved, ""};
  EXPECT_TRUE(continues(ApprovalFilter().on_head(approved, connection)));

  Request& refused = get("/");
  refused.decision.hold_ticket = 8;
  refused.hold = HoldState{HoldOutcome::kRefused, "denied by operator"};
  const FilterResult result = ApprovalFilter().on_head(refused, connection);
  EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 403);
  EXPECT_EQ(result.refusal.body, "zeroness: blocked by policy (denied by operator)\n");
  EXPECT_EQ(counters.denied.load(), 1u);
}

}  // namespace
}  // namespace zn::proxy::filters
