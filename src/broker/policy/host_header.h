// The Host header of an intercepted request, reduced to what policy and the
// Host == SNI check compare: a lowercase name without a trailing dot, and
// the port if one was given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zn::broker {

struct HostHeader {
  std::string name;
  std::optional<uint16_t> port;
};

// "Api.Example.com.:443" -> {"api.example.com", 443}; "[2001:db8::1]" ->
// {"2001:db8::1"}. nullopt when it is not host[:port].
std::optional<HostHeader> parse_host_header(std::string_view value);

}  // namespace zn::broker
