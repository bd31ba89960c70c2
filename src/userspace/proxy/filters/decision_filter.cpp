#include "userspace/proxy/filters/decision_filter.h"

namespace zn::proxy::filters {

FilterResult DecisionFilter::on_head(Request& request, Connection& connection) const {
  if (request.decided) return FilterResult::go();
  // The body's first bytes go with the facts: read by the exchange first.
  if (request.head.framing != http::BodyFraming::kNone && !request.body_preview)
    return FilterResult::of(FilterResult::Kind::kNeedPreview);
  const UpstreamDecision& conn = connection.facts;
  RequestFacts facts;
  facts.session = conn.session;
  if (conn.tls) facts.sni = conn.host;
  facts.port = conn.port;
  facts.host_header = request.head.host;
  facts.method = request.head.method;
  facts.path = request.target->path;
  facts.websocket = request.websocket;
  facts.want_session_secrets = !connection.session_secrets_loaded;
  facts.header_names.reserve(request.head.headers.size());
  for (const http::Header& h : request.head.headers) {
    std::string name = h.name;
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    facts.header_names.push_back(std::move(name));
  }
  if (request.body_preview) facts.body_preview = std::move(*request.body_preview);
  connection.counters.requests++;
  request.decision = connection.policy.decide_request(facts);
  request.decided = true;
  if (!request.decision.tripwires.empty() && !connection.tripwires_loaded) {
    connection.tripwires_loaded = true;
    connection.screen_blind = !connection.screen.arm(request.decision.tripwires);
  }
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
