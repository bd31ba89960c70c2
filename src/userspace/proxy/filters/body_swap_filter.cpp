#include "userspace/proxy/filters/body_swap_filter.h"

namespace zn::proxy::filters {

FilterResult BodySwapFilter::on_head(Request& request, Connection&) const {
  const std::vector<Substitution>& subs = request.decision.substitutions;
  if (subs.empty() || !request.body_whole) return FilterResult::go();
  const BodyKind kind = body_kind(request.head);
  if (kind == BodyKind::kOther) return FilterResult::go();
  if (!request.decoded_body) {
    swap_placeholders(request.body, subs, kind);
    return FilterResult::go();
  }
  http::DecodedBody& decoded = *request.decoded_body;
  if (decoded.bytes.size() <= kMaxSwappedBody && swap_placeholders(decoded.bytes, subs, kind) > 0)
    request.body = http::encode_content(decoded.bytes, decoded.layers);
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
