// Target normalisation: one normal form for every later step, or a 400
// audited by the proxy (the broker never sees it).
#include "userspace/proxy/filters/target_filter.h"

#include "filter_fixture.h"

namespace zn::proxy::filters {
namespace {

class TargetFilterTest : public FilterTest {};

TEST_F(TargetFilterTest, NormalisesThePathForEveryLaterStep) {
  Request& r = get("/repos/./zeroness/%7Euser//x?q=1");
  ASSERT_TRUE(continues(TargetFilter().on_head(r, connection)));
  ASSERT_TRUE(r.target);
  EXPECT_EQ(r.target->path, "/repos/zeroness/~user/x");
  EXPECT_EQ(r.summary.path, "/repos/zeroness/~user/x");
  EXPECT_EQ(r.summary.method, "GET");
  EXPECT_EQ(counters.bad_requests.load(), 0u);
}

TEST_F(TargetFilterTest, ATargetWithNoNormalFormIsRefusedAndAuditedHere) {
  // Ambiguous forms another server could read differently.
  for (const std::string target : {"/a%2Fb", "/v1/..;/admin", "/v1/%252e%252e/admin", "/a%00b"}) {
    Request& r = get(target);
    const FilterResult result = TargetFilter().on_head(r, connection);
    EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse) << target;
    EXPECT_EQ(result.refusal.status, 400) << target;
    EXPECT_NE(result.audit_error.find("bad request target"), std::string::npos) << target;
  }
  EXPECT_EQ(counters.bad_requests.load(), 4u);
}

TEST_F(TargetFilterTest, TheBrokersOwnServiceReadsItsTargetsItself) {
  facts.local = true;
  Request& r = get("/kv/a%2Fb");
  ASSERT_TRUE(continues(TargetFilter().on_head(r, connection)));
  EXPECT_FALSE(r.target);
  EXPECT_EQ(r.summary.path, "/kv/a%2Fb");
}

}  // namespace
}  // namespace zn::proxy::filters
