// The request body screened for tripwires before any of it goes: on a
// session with tripwires or placeholders, a body is read ahead of the head's
// forwarding (the exchange reads it: FilterResult::kNeedBody), up to
// kMaxSwappedBody; one read whole is screened here in every view, one
// longer streams behind the head through the exchange's stream screen, which
// holds back what could still complete a tripwire. A body with a content
// coding (gzip, deflate, br, zstd: what the upstream will decode) is
// screened as decoded, so it must come whole within kMaxCodedBody and
// decode within kMaxDecodedBody (413), in a coding the proxy reads (415),
// uncorrupted (400): what was not screened never goes. A tripwire found is
// the alarm and a 403.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

// As read (coded), and as decoded (a ratio of 1:1000 is easy for deflate).
inline constexpr size_t kMaxCodedBody = 1024 * 1024;
inline constexpr size_t kMaxDecodedBody = 16 * 1024 * 1024;

class BodyScreenFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "body screen"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
