// Canaries in names: a DNS query or an SNI is the classic exfiltration
// channel that needs no allowed host ("<key>.attacker.example"). Names are
// case-insensitive and split into labels, so both sides are folded to
// [a-z0-9] before comparing: "AKIA-FAKE.0001.evil.example" still carries
// "akiafake0001". Besides the canary itself, its lowercase hex and base32
// (the usual DNS-tunnel encodings, which survive case folding) are looked
// for; base64 does not survive a case-insensitive name and is not.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zn::broker {

// The index of the first canary `name` carries, or nullopt.
std::optional<size_t> canary_in_name(const std::vector<std::string>& canaries, std::string_view name);

}  // namespace zn::broker
