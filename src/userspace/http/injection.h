// A credential the proxy puts into a request it forwards: the header, its
// value, and the guest-supplied headers the rule owns (removed first). HTTP
// knows how to write it; the proxy decides when (proxy/policy.h).
#pragma once

#include <string>
#include <vector>

namespace zn::http {

struct Injection {
  std::string header;  // e.g. "Authorization"; with `query`, the parameter's name
  std::string value;   // the secret: never logged, cleansed after use
  // Guest-supplied headers the rule owns, removed before forwarding.
  std::vector<std::string> strip;
  // The secret itself (the token, not "Bearer token"): from this request to
  // the end of the guest connection, every response is scrubbed of it in
  // each of its usual encodings. Never logged, cleansed after use.
  std::vector<std::string> scrub;
  // In the query string instead of a header: `header`=`value`
  // percent-encoded, after every guest-supplied parameter of that name is
  // removed.
  bool query = false;
};

}  // namespace zn::http
