// Placeholders in the head: a request allowed under a rule naming a
// resource with a placeholder gets the credential in place of each one in
// its header values and its query (the path is never rewritten). The guest's
// head is left as it came (the screen read it); the upstream gets a copy.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class PlaceholderFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "placeholders"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
