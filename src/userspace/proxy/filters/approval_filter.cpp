#include "userspace/proxy/filters/approval_filter.h"

namespace zn::proxy::filters {

FilterResult ApprovalFilter::on_head(Request& request, Connection& connection) const {
  if (request.decision.hold_ticket == 0) return FilterResult::go();
  if (!request.hold) return FilterResult::of(FilterResult::Kind::kHold);
  if (request.hold->outcome == HoldOutcome::kApproved) return FilterResult::go();
  connection.counters.denied++;
  return FilterResult::refused(403, "zeroness: blocked by policy (" + request.hold->reason + ")\n");
}

}  // namespace zn::proxy::filters
