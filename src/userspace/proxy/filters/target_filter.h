// Target normalisation: the request's target in the one form every later
// step (the policy's path rules, the upstream) reads; a target that has no
// such form is refused (400) before the broker sees it.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class TargetFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "target"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
