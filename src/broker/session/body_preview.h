// The first bytes of a held request's body, as an operator is shown them
// (znctl approval list and watch, the webhook, the egress:ask event).
//
// The proxy hands over up to kMax raw bytes of the decoded body; they may
// carry the very credentials the session's policy holds (an agent pasting a
// token into a request). Every secret of the policy (each resource field) is
// looked for in each encoding the response scrubber knows
// (proxy::secret_patterns: raw, base64 and base64url at each alignment,
// percent-encoded, JSON and HTML escaped, hex) and replaced by "<redacted>".
// A secret cut off by the end of the preview would survive as a prefix: a
// trailing run of at least kMinPartial bytes that begins any of those
// patterns is dropped as "<redacted>" too (it may also be ordinary text: a
// few lost bytes of a preview cost nothing). What is left is printable
// ASCII; every other byte is shown as \xNN and '\' as "\\", so the result is
// one line of valid UTF-8 (the audit refuses anything else).
//
// Values after "password=" and the like are not looked for: only what the
// policy holds is known to be secret. Pure; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "broker/policy/policy.h"

namespace zn::broker {

struct BodyPreview {
  static constexpr size_t kMax = 256;       // raw bytes looked at
  static constexpr size_t kMinPartial = 4;  // a shorter trailing prefix is kept
  static constexpr std::string_view kRedacted = "<redacted>";
  // Header names shown: the first kMaxHeaderNames, each cut at
  // kMaxHeaderName bytes (an audit event stays far below its size limit).
  static constexpr size_t kMaxHeaderNames = 64;
  static constexpr size_t kMaxHeaderName = 128;
};

// `raw` (only its first BodyPreview::kMax bytes are used) with every
// `secrets` value, in every encoding, redacted, then escaped.
std::string redact_body_preview(std::string_view raw, const std::vector<std::string_view>& secrets);
// The same with every resource value of `policy`, revealed for this call
// only (the copies are wiped).
std::string redact_body_preview(std::string_view raw, const Policy& policy);
// The header names as shown: capped as above, escaped like the preview.
std::vector<std::string> shown_header_names(const std::vector<std::string>& names);

}  // namespace zn::broker
