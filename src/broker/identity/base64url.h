// base64url without padding (RFC 4648 section 5, as JOSE uses it: RFC 7515
// section 2). Decoding is strict, because a verifier must see exactly one
// spelling of each token: the URL-safe alphabet only, no padding, no
// whitespace, and the unused low bits of the last character zero (libsodium
// checks them), so a token cannot be re-spelled into a different string that
// decodes to the same bytes.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zn::broker {

std::string base64url_encode(std::span<const unsigned char> bytes);
std::string base64url_encode(std::string_view bytes);

// nullopt when text is not the canonical unpadded base64url of some bytes.
// Never throws on bad input.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace zn::broker
