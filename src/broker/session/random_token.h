// Random tokens a session hands its guest: placeholders for credentials
// (placeholders.h) and capability handles (cap_handles.h). Lowercase base32
// ([a-z2-7]) after a fixed prefix: the same raw, URL-encoded and
// JSON-escaped, so one literal finds it anywhere.
#pragma once

#include <string>
#include <string_view>

namespace zn::broker {

// `prefix` and `chars` characters of 5 random bits each (libsodium's CSPRNG).
std::string random_token(std::string_view prefix, size_t chars);

}  // namespace zn::broker
