#include "userspace/proxy/filters/local_service_filter.h"

namespace zn::proxy::filters {

FilterResult LocalServiceFilter::on_head(Request&, Connection& connection) const {
  return connection.facts.local ? FilterResult::of(FilterResult::Kind::kServeLocally) : FilterResult::go();
}

}  // namespace zn::proxy::filters
