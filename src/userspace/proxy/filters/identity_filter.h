// The rule's identity, made ready to place: taken from the verdict (or, for
// a request held for a human, fetched once approved: the policy may have
// changed meanwhile), and every secret it carries added to the connection's
// scrubber before the request goes, so from this request to the connection's
// end no response hands it back. A rule whose identity cannot be had, or
// whose secret the scrubber cannot hold, is refused (403): a credential is
// never sent where its echo could not be caught. The codec places it
// (http::forwarded_request_head).
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class IdentityFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "identity"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
