// On a connection's first allowed request the broker hands over the
// session's secrets: the scrubber is armed with them before the
// connection's first response, as an upstream may replay on this
// connection what it was given on another one.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class SessionSecretsFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "session secrets"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
