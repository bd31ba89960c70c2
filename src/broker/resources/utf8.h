// Whether bytes are well-formed UTF-8 (no overlong forms, no surrogates, at
// most U+10FFFF): what nlohmann::json's dump accepts. Text the stores hand to
// the JSON layer is checked first, so a stored byte string can never make the
// response throw.
#pragma once

#include <string_view>

namespace zn::broker {

bool valid_utf8(std::string_view bytes);

}  // namespace zn::broker
