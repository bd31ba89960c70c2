#include "broker/session/canary_names.h"

namespace zn::broker {
namespace {

std::string fold(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) out.push_back(c);
  }
  return out;
}

std::string hex(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// RFC 4648 base32, lowercase, no padding; the last partial group is left
// out so the form matches inside a longer encoded run.
std::string base32(std::string_view s) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string out;
  uint64_t bits = 0;
  int have = 0;
  for (unsigned char c : s) {
    bits = bits << 8 | c;
    have += 8;
    while (have >= 5) {
      out.push_back(kAlphabet[(bits >> (have - 5)) & 31]);
      have -= 5;
    }
  }
  return out;
}

}  // namespace

std::optional<size_t> canary_in_name(const std::vector<std::string>& canaries, std::string_view name) {
  if (canaries.empty()) return std::nullopt;
  const std::string folded = fold(name);
  for (size_t i = 0; i < canaries.size(); ++i) {
    for (const std::string& form : {fold(canaries[i]), hex(canaries[i]), base32(canaries[i])}) {
      // Too short once folded ("a-b-c-d-"): it would match ordinary names.
      if (form.size() >= 6 && folded.find(form) != std::string::npos) return i;
    }
  }
  return std::nullopt;
}

}  // namespace zn::broker
