#include "userspace/proxy/filters/response_rules_filter.h"

#include "userspace/http/rewrite.h"

namespace zn::proxy::filters {

FilterResult ResponseRulesFilter::on_response_head(const http::ResponseHead& response,
                                                   Connection& connection) const {
  if (!connection.scrubber.armed()) return FilterResult::go();
  if (response.framing != http::BodyFraming::kNone && !http::identity_content_encoding(response))
    return FilterResult::refused_here(502, "zeroness: upstream failed\n",
                                      "upstream compressed a response that must be scanned for secrets");
  if (http::is_partial_response(response))
    return FilterResult::refused_here(
        502, "zeroness: upstream failed\n",
        "upstream sent a partial response where responses must be scanned for secrets");
  return FilterResult::go();
}

}  // namespace zn::proxy::filters
