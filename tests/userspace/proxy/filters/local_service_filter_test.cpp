// The broker's own service ends the chain on a local connection, and only
// there.
#include "userspace/proxy/filters/local_service_filter.h"

#include "filter_fixture.h"

namespace zn::proxy::filters {
namespace {

class LocalServiceFilterTest : public FilterTest {};

TEST_F(LocalServiceFilterTest, ALocalConnectionIsServedByTheBroker) {
  facts.local = true;
  Request& r = get("/kv/x");
  EXPECT_EQ(LocalServiceFilter().on_head(r, connection).kind, FilterResult::Kind::kServeLocally);
}

TEST_F(LocalServiceFilterTest, AnyOtherGoesOnToThePolicy) {
  Request& r = get("/kv/x");
  EXPECT_TRUE(continues(LocalServiceFilter().on_head(r, connection)));
}

}  // namespace
}  // namespace zn::proxy::filters
