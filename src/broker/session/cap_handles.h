// Capability handles (issue 13): each capability a session's policy
// declares gets an unforgeable handle, "cap:" and 32 characters of [a-z2-7]
// (160 random bits), that the guest is given (session show's guest_env,
// ZN_CAP_<NAME>) and presents to reach it. A handle is bound to its session
// and capability; it is never derived from either, so one cannot be guessed
// from another.
#pragma once

#include <map>
#include <string>

#include "broker/policy/policy.h"

namespace zn::broker {

inline constexpr std::string_view kCapHandlePrefix = "cap:";

// The name guests reach their capabilities at: answered by the governed DNS
// with zerod's configured addresses, terminated by the proxy with the
// deployment CA and served by zerod itself; nothing for it leaves the host.
inline constexpr std::string_view kCapabilityHost = "cap.zeroness.internal";

std::string new_cap_handle();

// The handles of a policy's capabilities: kept from `previous` for a
// capability still declared (a running guest holds it), made for new ones,
// dropped for the rest (a dropped handle never comes back).
std::map<std::string, std::string> assign_cap_handles(const Policy& policy,
                                                      const std::map<std::string, std::string>& previous);

// The guest's environment variable for capability `name`: ZN_CAP_ and the
// name in upper case, '-' as '_'.
std::string cap_env_name(const std::string& name);

}  // namespace zn::broker
