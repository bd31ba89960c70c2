#include "userspace/proxy/filters/verdict_filter.h"

namespace zn::proxy::filters {

FilterResult VerdictFilter::on_head(Request& request, Connection& connection) const {
  const RequestDecision& d = request.decision;
  if (d.allow) return FilterResult::go();
  connection.counters.denied++;
  const std::string label = d.status == 429 ? "rate limited" : "blocked by policy";
  return FilterResult::refused(d.status, "zeroness: " + label + " (" + d.reason + ")\n");
}

}  // namespace zn::proxy::filters
