// Placeholders: random stand-ins for a session's credentials, handed to the
// guest (session show's guest_env) for SDKs that refuse to start without an
// API key. The proxy swaps one for the real credential only in a request a
// rule naming its resource allowed; anywhere else it is secret:misuse.
//
// Spelled from [a-z0-9_] only, so a placeholder reads the same raw, URL- or
// form-encoded and JSON-escaped: one literal to look for.
#pragma once

#include <map>
#include <string>

#include "broker/policy/policy.h"

namespace zn::broker {

inline constexpr std::string_view kPlaceholderPrefix = "zn_ph_";

// A fresh placeholder: the prefix and 32 characters of [a-z2-7] (160 random bits).
std::string new_placeholder();

// The placeholders of a policy's resources that ask for one: kept from
// `previous` for a resource that still asks (a running guest holds them),
// made for new ones, dropped for the rest.
std::map<std::string, std::string> assign_placeholders(const Policy& policy,
                                                       const std::map<std::string, std::string>& previous);

}  // namespace zn::broker
