// A response head's or trailer section's fields scrubbed of the connection's
// secrets (secret_scrubber.h) whatever the guest's codec: they are written
// out once as HTTP/1.1 lines (so RFC 2231 continuations are joined as in any
// head) and scrubbed in place; the replacement keeps every length, so each
// name, value and the reason phrase are cut back out where they were.
#pragma once

#include <string>
#include <vector>

#include "userspace/http/message.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy {

// A head's reason phrase and fields (forwarded already), in place.
ScrubReport scrub_head(const SecretScrubber& scrubber, http::ResponseHead& head);
// Trailer fields, in place.
ScrubReport scrub_fields(const SecretScrubber& scrubber, std::vector<http::Header>& fields);

}  // namespace zn::proxy
