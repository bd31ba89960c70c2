// The head's last steps: placeholders swapped in the copy that goes (header
// values and the query, never the guest's own head or the path), and the
// rule's identity made ready with its secret in the scrubber, or the
// request refused.
#include "userspace/proxy/filters/identity_filter.h"
#include "userspace/proxy/filters/placeholder_filter.h"

#include "filter_fixture.h"
#include "userspace/proxy/filters/target_filter.h"

namespace zn::proxy::filters {
namespace {

class HeadEndFiltersTest : public FilterTest {
 protected:
  Request& allowed(const std::string& target, const std::string& fields = "") {
    Request& r = get(target, fields);
    EXPECT_TRUE(continues(TargetFilter().on_head(r, connection)));
    r.decision.allow = true;
    r.decision.host = "api.example.test";
    return r;
  }
  // How much of `text` the connection's scrubber replaces.
  size_t scrubbed(std::string text) const { return scrubber.scrub(text).matches; }
};

TEST_F(HeadEndFiltersTest, PlaceholdersAreSwappedInTheCopyThatGoes) {
  Request& r = allowed("/" + kPlaceholder + "?key=" + kPlaceholder + "&a=1",
                       "Authorization: Bearer " + kPlaceholder + "\r\n");
  r.decision.substitutions.push_back(Substitution{kPlaceholder, "sk live/1", "placeholder:stripe"});
  ASSERT_TRUE(continues(PlaceholderFilter().on_head(r, connection)));
  EXPECT_EQ(*r.send_head().find("authorization"), "Bearer sk live/1");
  EXPECT_EQ(r.send_target().query, "key=sk%20live%2F1&a=1");
  EXPECT_EQ(r.send_target().path, "/" + kPlaceholder);  // the path is never rewritten
  // The guest's own head and target are as they came (the screen read them).
  EXPECT_EQ(*r.head.find("authorization"), "Bearer " + kPlaceholder);
  EXPECT_EQ(r.target->query, "key=" + kPlaceholder + "&a=1");
}

TEST_F(HeadEndFiltersTest, NoPlaceholderNoCopy) {
  Request& r = allowed("/x?key=" + kPlaceholder, "Authorization: Bearer " + kPlaceholder + "\r\n");
  ASSERT_TRUE(continues(PlaceholderFilter().on_head(r, connection)));
  EXPECT_FALSE(r.changed_head);
  EXPECT_FALSE(r.changed_target);
  EXPECT_EQ(&r.send_head(), &r.head);
}

TEST_F(HeadEndFiltersTest, TheVerdictsIdentityIsTakenAndItsSecretScrubbed) {
  Request& r = allowed("/");
  r.decision.rule = RuleRef{0, "stripe"};
  r.decision.injection =
      Injection{"Authorization", "Bearer sk_live_abcdef123456", {}, {"sk_live_abcdef123456"}};
  ASSERT_TRUE(continues(IdentityFilter().on_head(r, connection)));
  ASSERT_TRUE(r.injection);
  EXPECT_EQ(r.injection->value, "Bearer sk_live_abcdef123456");
  EXPECT_FALSE(r.decision.injection);    // one owner
  EXPECT_TRUE(policy.injected.empty());  // no second trip
  EXPECT_EQ(scrubbed("echo: sk_live_abcdef123456"), 1u);
  EXPECT_EQ(scrubber.label(0), "stripe");
}

TEST_F(HeadEndFiltersTest, ABrokerNamingNoSubstringGetsTheWholeValueScrubbed) {
  Request& r = allowed("/");
  r.decision.rule = RuleRef{0, "key"};
  r.decision.injection = Injection{"X-Api-Key", "whole-value-secret-1", {}, {}};
  ASSERT_TRUE(continues(IdentityFilter().on_head(r, connection)));
  EXPECT_EQ(scrubbed("whole-value-secret-1"), 1u);
}

TEST_F(HeadEndFiltersTest, AHeldRequestsIdentityIsFetchedOnceApproved) {
  policy.injection = Injection{"X-Api-Key", "fetched-secret-value", {}, {}};
  Request& r = allowed("/");
  r.decision.rule = RuleRef{0, "key"};
  ASSERT_TRUE(continues(IdentityFilter().on_head(r, connection)));
  EXPECT_EQ(policy.injected, std::vector<std::string>{"key"});
  ASSERT_TRUE(r.injection);
  EXPECT_EQ(r.injection->value, "fetched-secret-value");
  EXPECT_EQ(scrubbed("fetched-secret-value"), 1u);
}

TEST_F(HeadEndFiltersTest, AnIdentityThatCannotBeHadIsARefusal) {
  Request& r = allowed("/");
  r.decision.rule = RuleRef{0, "gone"};
  const FilterResult result = IdentityFilter().on_head(r, connection);
  ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 403);
  EXPECT_EQ(result.refusal.body, "zeroness: blocked by policy (identity unavailable)\n");
  EXPECT_EQ(result.audit_error, "identity unavailable");
  // Positive control: a rule without an identity asks for none.
  Request& plain = allowed("/");
  plain.decision.rule = RuleRef{0, ""};
  EXPECT_TRUE(continues(IdentityFilter().on_head(plain, connection)));
  EXPECT_FALSE(plain.injection);
  EXPECT_EQ(policy.injected, std::vector<std::string>{"gone"});
}

TEST_F(HeadEndFiltersTest, ASecretTheScrubberCannotHoldIsNeverSent) {
  Request& r = allowed("/");
  r.decision.rule = RuleRef{0, "huge"};
  const std::string huge(SecretScrubber::kMaxSecretBytes + 1, 'k');
  r.decision.injection = Injection{"X-Api-Key", huge, {}, {huge}};
  const FilterResult result = IdentityFilter().on_head(r, connection);
  ASSERT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.body,
            "zeroness: blocked by policy (identity cannot be scrubbed from responses)\n");
  // Positive control: one the scrubber holds goes on.
  Request& ok = allowed("/");
  ok.decision.rule = RuleRef{0, "fits"};
  ok.decision.injection = Injection{"X-Api-Key", "a-secret-that-fits", {}, {"a-secret-that-fits"}};
  EXPECT_TRUE(continues(IdentityFilter().on_head(ok, connection)));
}

}  // namespace
}  // namespace zn::proxy::filters
