#include "userspace/command/reply_seal.h"

#include <sodium.h>

namespace zn::command {
namespace {

constexpr std::string_view kReplyDomain = "zeroness/reply/v1";

}  // namespace

std::array<unsigned char, kReplyTagSize> reply_tag(const ResultKey& key, const Nonce& nonce, uint64_t seq,
                                                   FrameKind kind, std::string_view payload) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key.data(), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(kReplyDomain.data()),
                                kReplyDomain.size());
  crypto_auth_hmacsha256_update(&st, nonce.data(), nonce.size());
  unsigned char fixed[9];
  for (int i = 0; i < 8; ++i) fixed[i] = static_cast<unsigned char>(seq >> (8 * (7 - i)));
  fixed[8] = static_cast<unsigned char>(kind);
  crypto_auth_hmacsha256_update(&st, fixed, sizeof fixed);
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(payload.data()), payload.size());
  std::array<unsigned char, kReplyTagSize> tag{};
  crypto_auth_hmacsha256_final(&st, tag.data());
  sodium_memzero(&st, sizeof st);
  return tag;
}

std::string ReplySealer::seal(FrameKind kind, std::string_view payload) {
  const auto tag = reply_tag(key_, nonce_, seq_++, kind, payload);
  std::string sealed;
  sealed.reserve(payload.size() + tag.size());
  sealed.append(payload);
  sealed.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  return frame(kind, sealed);
}

bool ReplyOpener::open(Frame& f) {
  if (f.payload.size() < kReplyTagSize) return false;
  const std::string_view payload(f.payload.data(), f.payload.size() - kReplyTagSize);
  const auto want = reply_tag(key_, nonce_, seq_, f.kind, payload);
  if (sodium_memcmp(want.data(), f.payload.data() + payload.size(), kReplyTagSize) != 0) return false;
  ++seq_;
  f.payload.resize(payload.size());
  return true;
}

bool parse_result_key(std::string_view hex, ResultKey& out) {
  size_t len = 0;
  return hex.size() == 2 * kResultKeySize &&
         sodium_hex2bin(out.data(), out.size(), hex.data(), hex.size(), nullptr, &len, nullptr) == 0 &&
         len == out.size();
}

std::string result_key_hex(const ResultKey& key) {
  std::string hex(key.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), key.data(), key.size());
  hex.pop_back();
  return hex;
}

}  // namespace zn::command
