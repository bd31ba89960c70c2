#include "userspace/proxy/filters/placeholder_filter.h"

namespace zn::proxy::filters {

FilterResult PlaceholderFilter::on_head(Request& request, Connection&) const {
  const std::vector<Substitution>& subs = request.decision.substitutions;
  if (subs.empty()) return FilterResult::go();
  for (http::Header& h : request.head_to_change().headers) swap_placeholders(h.value, subs, BodyKind::kOther);
  if (request.target->has_query) {
    request.changed_target = *request.target;
    swap_placeholders_in_query(request.changed_target->query, subs);
  }
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
