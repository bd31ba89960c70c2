// Header fields between HTTP/1.1-shaped lists and HTTP/2 header blocks
// (RFC 9113 8.2-8.3), beyond what nghttp2 checks itself.
//
// Inbound, nghttp2 (HTTP messaging on) already rejects upper-case names,
// connection-specific fields, TE other than "trailers", unknown, duplicate
// or misplaced pseudo-headers, a missing :method/:scheme/:path. What is left
// here: :authority and Host agreeing, a single Host, the form of :path.
// Outbound, nghttp2 sends what it is given, so the fields are made valid
// HTTP/2 here.
#pragma once

#include <string>
#include <vector>

#include "userspace/h2/h2_events.h"

namespace zn::h2 {

// Splits a request header block (pseudo-headers first, as nghttp2 has
// checked) into `out`. nullptr, or the reason the request is malformed.
const char* read_request_block(std::vector<Field>&& block, RequestHeaders& out);

// The :status of a response header block, and the regular fields in
// `headers`; 0 when :status is missing or not three digits.
int read_response_block(std::vector<Field>&& block, std::vector<Field>& headers);

// Copies `in` as HTTP/2 fields: names lower-cased; the connection-specific
// fields (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
// Upgrade; TE unless "trailers") and Host (carried as :authority) dropped.
// nullptr, or the reason a field cannot be sent: a name that is not a token
// (a pseudo-header among them), a value with CR, LF or NUL.
const char* to_h2_fields(const std::vector<Field>& in, std::vector<Field>& out);

// RFC 9113 8.2.2: a field that must not appear in HTTP/2. `name` lower-case.
bool is_connection_specific(const std::string& name, const std::string& value);

}  // namespace zn::h2
