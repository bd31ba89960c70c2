#include "broker/session/placeholders.h"

#include <sodium.h>

#include <array>
#include <stdexcept>

namespace zn::broker {

std::string new_placeholder() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");  // idempotent
  std::array<unsigned char, 32> random{};
  randombytes_buf(random.data(), random.size());
  std::string out(kPlaceholderPrefix);
  for (unsigned char b : random) out.push_back(kAlphabet[b & 31]);  // 5 bits of each byte
  return out;
}

std::map<std::string, std::string> assign_placeholders(const Policy& policy,
                                                       const std::map<std::string, std::string>& previous) {
  std::map<std::string, std::string> out;
  for (const auto& [name, resource] : policy.resources) {
    if (!resource.placeholder_env) continue;
    auto kept = previous.find(name);
    out[name] = kept != previous.end() ? kept->second : new_placeholder();
  }
  return out;
}

}  // namespace zn::broker
