#include "broker/session/random_token.h"

#include <sodium.h>

#include <stdexcept>
#include <vector>

namespace zn::broker {

std::string random_token(std::string_view prefix, size_t chars) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");  // idempotent
  std::vector<unsigned char> random(chars);
  randombytes_buf(random.data(), random.size());
  std::string out(prefix);
  for (unsigned char b : random) out.push_back(kAlphabet[b & 31]);  // 5 bits of each byte
  sodium_memzero(random.data(), random.size());
  return out;
}

}  // namespace zn::broker
