// The policy decision: one trip to the broker per request, carrying
// everything it decides on (the connection's SNI and port, the Host, method,
// normalised path, header names, the body's first bytes for an approver).
// The answer holds the verdict, the rule and its identity, the request's
// placeholders and, on a connection's first request, the session's secrets
// and tripwires; the tripwires are armed here, before anything is screened.
// The broker never blocks (a lookup under its snapshot), so this runs on the
// proxy's loop: a hop to a pool and back would cost two thread handoffs.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class DecisionFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "decision"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
