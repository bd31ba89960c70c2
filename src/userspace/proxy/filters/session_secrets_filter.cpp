#include "userspace/proxy/filters/session_secrets_filter.h"

#include <string_view>
#include <utility>
#include <vector>

namespace zn::proxy::filters {

FilterResult SessionSecretsFilter::on_head(Request& request, Connection& connection) const {
  if (connection.session_secrets_loaded || !request.decision.allow) return FilterResult::go();
  connection.session_secrets_loaded = true;
  // One too big for the scrubber is refused again should it ever be injected.
  std::vector<std::pair<std::string_view, std::string_view>> list;
  list.reserve(request.decision.session_secrets.size());
  for (const ScrubSecret& s : request.decision.session_secrets) list.emplace_back(s.secret, s.identity);
  connection.scrubber.add_secrets(list);
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
