// libFuzzer target: the command envelope parser the in-sandbox agent
// exposes to whatever reaches its transport (issue 15).
//
// Build and run: as http1_fuzz (see there), target command_envelope_fuzz.
//
// Two halves, chosen by the first byte: arbitrary bytes straight into the
// parser (no crash, no read past the input, nothing accepted: the fuzzer has
// no key); and an envelope sealed here under a fixed key, then one byte
// changed where the input says: it must never verify as it was signed
// unless the change left it as it was.
#include <sodium.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/command/envelope.h"

namespace {

using namespace zn::command;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Key {
  PublicKey pk{};
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  Key() {
    check(sodium_init() >= 0);
    unsigned char seed[crypto_sign_SEEDBYTES] = {7};
    crypto_sign_seed_keypair(pk.data(), sk, seed);
  }
};

bool accepts(std::string_view bytes, const PublicKey& pk) {
  EnvelopeHeader h;
  size_t header_size = 0;
  if (parse_and_verify_header(bytes, pk, VerifyLimits{}, h, &header_size) != Rejection::kNone) return false;
  check(header_size <= bytes.size());
  return verify_body(h, bytes.substr(header_size)) == Rejection::kNone;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Key key;
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    check(!accepts(rest, key.pk));  // unsigned bytes never verify
    return 0;
  }
  if (rest.size() < 3) return 0;
  const size_t at = (static_cast<unsigned char>(rest[0]) << 8 | static_cast<unsigned char>(rest[1]));
  const char flip = rest[2];
  const std::string body(rest.substr(3));
  const std::string sealed = seal_envelope(
      static_cast<CommandType>(1 + body.size() % 4), "s-" + std::to_string(body.size() % 7), body,
      std::chrono::system_clock::now(), [&](std::string_view m) {
        Signature s;
        crypto_sign_detached(s.data(), nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(),
                             key.sk);
        return s;
      });
  check(accepts(sealed, key.pk));
  std::string changed = sealed;
  changed[at % changed.size()] ^= flip;
  check(accepts(changed, key.pk) == (changed == sealed));
  // And every prefix of it is refused.
  check(!accepts(std::string_view(sealed).substr(0, at % sealed.size()), key.pk));
  return 0;
}
