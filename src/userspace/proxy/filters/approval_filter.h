// The approval hold: a request the broker holds for a human goes nowhere
// until its ticket is decided. The exchange does the waiting (it watches the
// guest meanwhile: a guest that goes cancels the ticket) and the filter
// reads the outcome: approved goes on, anything else is refused (403 with
// the broker's reason).
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class ApprovalFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "approval"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
