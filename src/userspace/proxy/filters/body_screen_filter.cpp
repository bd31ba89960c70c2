#include "userspace/proxy/filters/body_screen_filter.h"

namespace zn::proxy::filters {
namespace {

FilterResult tripwire_refusal(Request& request, Connection& connection, std::vector<std::string> labels) {
  connection.counters.denied++;
  FilterResult r = FilterResult::refused_here(403, std::string(kTripwireRefusalBody), "tripwire in body");
  r.alarm = tripwire_alarm(request, connection, std::move(labels), {"body"});
  return r;
}

}  // namespace

FilterResult BodyScreenFilter::on_head(Request& request, Connection& connection) const {
  const std::vector<Substitution>& exempt = request.decision.substitutions;
  if (request.head.framing == http::BodyFraming::kNone) return FilterResult::go();
  if (!connection.screen.armed() && exempt.empty()) return FilterResult::go();
  const std::vector<std::string> codings = http::content_codings(request.head.headers);
  if (!request.body_read) {
    request.body_limit = codings.empty() ? kMaxSwappedBody : kMaxCodedBody;
    return FilterResult::of(FilterResult::Kind::kNeedBody);
  }
  if (!codings.empty()) {
    if (!request.body_whole)
      return FilterResult::refused_here(413, "zeroness: request body too large to screen\n",
                                        "request body with a content coding too large to screen");
    if (!request.decoded_body)
      request.decoded_body = http::decode_content(request.body, codings, kMaxDecodedBody);
    const http::DecodedBody& decoded = *request.decoded_body;
    if (!decoded.ok)
      return FilterResult::refused_here(decoded.status, "zeroness: " + decoded.error + "\n", decoded.error);
    std::vector<std::string> hits = connection.screen.check(decoded.bytes, exempt);
    if (!hits.empty()) return tripwire_refusal(request, connection, std::move(hits));
  }
  // The bytes as sent, too: the upstream may not be the only reader.
  if (request.body_whole) {
    std::vector<std::string> hits = connection.screen.check(request.body, exempt);
    if (!hits.empty()) return tripwire_refusal(request, connection, std::move(hits));
  }
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
