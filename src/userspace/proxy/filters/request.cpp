// A request's credentials are wiped when it ends, on every path: the
// exchange may leave a request at any filter, on a refusal, a throw or the
// guest going.
#include <openssl/crypto.h>

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {
namespace {

void wipe(std::string& s) { OPENSSL_cleanse(s.data(), s.size()); }

void wipe(Injection& i) {
  wipe(i.value);
  for (std::string& s : i.scrub) wipe(s);
}

}  // namespace

Request::~Request() {
  if (decision.injection) wipe(*decision.injection);
  for (ScrubSecret& s : decision.session_secrets) wipe(s.secret);
  for (Substitution& s : decision.substitutions) wipe(s.credential);
  if (injection) wipe(*injection);
  if (changed_head)
    for (http::Header& h : changed_head->headers) wipe(h.value);
  if (changed_target) wipe(changed_target->query);
  wipe(body);
  if (decoded_body) wipe(decoded_body->bytes);
}

}  // namespace zn::proxy::filters
