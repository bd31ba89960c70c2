// Where a request to a declared port carries its admission (issue 14): a
// one-time ticket in the `Zn-Ticket` header, the `zn_ticket` query parameter
// or a `/_zn/<ticket>` path prefix; or the binding a redeemed ticket left in
// the client's `zn_ingress_<port>` cookie (one per port: a browser keeps one
// cookie jar per host, whatever the port). Found in the first request head of a
// connection and taken out of it, so the guest never sees them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "userspace/http/message.h"

namespace zn::ingress {

inline constexpr std::string_view kTicketHeader = "Zn-Ticket";
inline constexpr std::string_view kTicketParameter = "zn_ticket";
inline constexpr std::string_view kTicketPathPrefix = "/_zn/";
inline constexpr std::string_view kBindingCookiePrefix = "zn_ingress_";
std::string binding_cookie_name(uint16_t port);

struct Admission {
  std::optional<std::string> ticket;   // from exactly one carrier
  std::optional<std::string> binding;  // the cookie's value
  // The head to forward: the request line and headers as received, less
  // every carrier (the header, the parameter, the path prefix, the cookie).
  std::string forwarded_head;
  // Non-empty: the request is refused (400) for it: two carriers, a
  // repeated parameter or cookie, an empty ticket.
  std::string error;
};

// `head` parsed from the connection's first bytes (parse_request_head), for
// the declared `port` (whose binding cookie is taken; others' pass on).
Admission take_admission(const http::RequestHead& head, uint16_t port);

}  // namespace zn::ingress
