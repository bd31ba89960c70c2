// Where a request to the capability gateway goes, read from its target
// alone, before any handle is looked up (issue 13):
//
//   /v1/kv/<handle>/<key>      /v1/blob/<handle>/<path>
//   /v1/sql/<handle>           /v1/queue/<handle>/send|receive|ack
//
// The query string is ignored. Each route segment is percent-decoded (so
// "cap%3A..." is the handle "cap:..."); the key or path after the handle is
// kept as sent, because whether it decodes is only said to a guest whose
// handle resolved. Nothing here looks at what a handle is worth.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "broker/policy/policy.h"

namespace zn::broker {

enum class QueueOp { kSend, kReceive, kAck };

struct GatewayRoute {
  std::optional<CapabilityKind> kind;  // set once "/v1/<kind>/" is recognised
  bool matched = false;                // the whole shape matched: handle (and op) below
  std::string handle;                  // percent-decoded, not yet checked
  std::string rest;                    // kv key / blob path as sent (may be empty); "" otherwise
  QueueOp queue_op = QueueOp::kSend;   // queue only
};

GatewayRoute parse_gateway_route(std::string_view target);

// "cap:" and 32 characters of [a-z2-7]: the only shape zerod issues
// (session/cap_handles.h). Anything else is not looked up.
bool well_formed_handle(std::string_view handle);

// %XX decoded ('+' stays a '+': this is a path, not a form); nullopt when a
// '%' is not followed by two hex digits.
std::optional<std::string> percent_decode_path(std::string_view text);

}  // namespace zn::broker
