// Printable names of the datapath verdicts ("pass:dns", "drop:ip4_spoof").
#pragma once

#include <optional>
#include <string_view>

#include "zn_abi.h"

namespace zn::dp {

std::string_view verdict_name(unsigned verdict);  // "unknown" when out of range
std::optional<unsigned> verdict_from_name(std::string_view name);
// A verdict's kind is its name's: pass:exposed was numbered after the drops.
inline bool is_drop(unsigned verdict) { return verdict_name(verdict).starts_with("drop:"); }

}  // namespace zn::dp
