// Standard base64 (RFC 4648 section 4, with padding) for bytes that cross the
// JSON boundary of the resource stores: SQL blob parameters and blob columns
// travel as {"base64": "..."}. Decoding is strict (canonical padding, no
// whitespace), because the text comes from the guest.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zn::broker {

std::string base64_encode(std::string_view bytes);

// nullopt when text is not the canonical base64 of some bytes.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace zn::broker
