#include "userspace/proxy/filters/session_secrets_filter.h"

namespace zn::proxy::filters {

FilterResult SessionSecretsFilter::on_head(Request& request, Connection& connection) const {
  if (connection.session_secrets_loaded || !request.decision.allow) return FilterResult::go();
  connection.session_secrets_loaded = true;
  // One too big for the scrubber is refused again should it ever be injected.
  for (const ScrubSecret& s : request.decision.session_secrets)
    connection.scrubber.add_secret(s.secret, s.identity);
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
