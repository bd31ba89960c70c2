// The broker's own service (capability resources on the gateway address):
// no policy verdict and no upstream; the broker routes, rate-limits and
// audits each request itself. Ends the chain for a local connection.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class LocalServiceFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "local service"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
