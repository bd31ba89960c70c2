#include "userspace/proxy/filters/target_filter.h"

namespace zn::proxy::filters {

FilterResult TargetFilter::on_head(Request& request, Connection& connection) const {
  request.summary.method = request.head.method;
  std::string why;
  request.target = http::normalise_target(request.head.target, &why);
  // The broker's own service reads its targets itself (a KV key may hold
  // any byte, "%2F" included); nothing of them reaches another server whose
  // reading could differ.
  if (!request.target && !connection.facts.local) {
    connection.counters.bad_requests++;
    return FilterResult::refused_here(400, "zeroness: bad request (" + why + ")\n",
                                      "bad request target: " + why);
  }
  request.summary.path = request.target ? request.target->path : request.head.target;
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
