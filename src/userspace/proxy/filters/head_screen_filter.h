// The request screen over the head: the session's tripwires (canaries, and
// placeholders not headed for their own rule) in the target's path and
// query as sent and in the header lines, by rule over every spelling
// (request_screen.h). Runs before the verdict is acted on: a canary sent to
// a denied host is an alarm all the same. A screen that could not be armed
// refuses every request (it cannot see).
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class HeadScreenFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "head screen"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
