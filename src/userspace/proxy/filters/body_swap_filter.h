// Placeholders in a request body read whole (the body screen read it): a
// JSON or form body gets the credential in place of each placeholder,
// encoded for where it lands; a coded body is swapped in its decoded bytes
// and coded again in each layer's own format (one that decodes past
// kMaxSwappedBody goes as it came). A streamed body, or one of another
// kind, is never swapped.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class BodySwapFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "body swap"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
