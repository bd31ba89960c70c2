// The broker's verdict acted on: a request it did not allow is answered with
// its status (403 policy, 421 misdirected, 429 over the session's rate) and
// reason; it audited the refusal itself.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class VerdictFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "verdict"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
