// Range and encoding rules on the way back: on a connection whose responses
// are scrubbed, a response the scrubber cannot read whole is not passed on.
// A compressed body could hide a reflected secret (the upstream was asked
// for identity); a part of a body (206, multipart/byteranges) could carry a
// piece of one, recognisable in no piece (no Range went on, so the guest did
// not choose the cut; a part is refused whoever chose it). The request side
// of the same rule (Range, If-Range, Request-Range and Accept-Encoding not
// forwarded) is in http::forwarded_request.
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

// A filter of the upstream's response head.
class ResponseHeadFilter {
 public:
  virtual ~ResponseHeadFilter() = default;
  virtual std::string_view name() const = 0;
  // kContinue, or kRefuse with audit_error saying why (the upstream failed:
  // the guest gets a 502 and nothing of the response).
  virtual FilterResult on_response_head(const http::ResponseHead& response, Connection& connection) const = 0;
};

class ResponseRulesFilter final : public ResponseHeadFilter {
 public:
  std::string_view name() const override { return "range and encoding rules"; }
  FilterResult on_response_head(const http::ResponseHead& response, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
