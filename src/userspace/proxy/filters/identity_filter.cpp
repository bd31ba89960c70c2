#include "userspace/proxy/filters/identity_filter.h"

namespace zn::proxy::filters {

FilterResult IdentityFilter::on_head(Request& request, Connection& connection) const {
  RequestDecision& decision = request.decision;
  if (decision.injection) {
    request.injection = std::move(decision.injection);
    decision.injection.reset();
  } else if (decision.rule && !decision.rule->identity.empty()) {
    request.injection = connection.policy.injection_for(connection.facts.session, *decision.rule);
    if (!request.injection)
      return FilterResult::refused_here(403, "zeroness: blocked by policy (identity unavailable)\n",
                                        "identity unavailable");
  } else {
    return FilterResult::go();
  }
  Injection& injection = *request.injection;
  // A broker that names no substring gets the whole value scrubbed.
  if (injection.scrub.empty()) injection.scrub.push_back(injection.value);
  const std::string who = decision.rule ? decision.rule->identity : "";
  bool scrubbable = true;
  for (const std::string& secret : injection.scrub)
    scrubbable = connection.scrubber.add_secret(secret, who) && scrubbable;
  if (!scrubbable)
    return FilterResult::refused_here(
        403, "zeroness: blocked by policy (identity cannot be scrubbed from responses)\n",
        "identity cannot be scrubbed from responses");
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
