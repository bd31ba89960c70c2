#include "userspace/command/envelope.h"

#include <sodium.h>

#include <algorithm>
#include <stdexcept>

namespace zn::command {
namespace {

constexpr std::string_view kMagic = "ZNC1";
constexpr uint8_t kVersion = 1;
constexpr std::string_view kEnvelopeDomain = "zeroness/command/v1";

void put_be(std::string& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get_be(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(in[at + i]);
  return v;
}

bool known_type(uint8_t t) { return t >= 1 && t <= 5; }

void init_sodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium did not initialise");
}

}  // namespace

std::string_view command_type_name(CommandType t) {
  switch (t) {
    case CommandType::kPing:
      return "ping";
    case CommandType::kExec:
      return "exec";
    case CommandType::kPut:
      return "put";
    case CommandType::kGet:
      return "get";
    case CommandType::kRekey:
      return "rekey";
  }
  return "unknown";
}

std::string_view rejection_name(Rejection r) {
  switch (r) {
    case Rejection::kNone:
      return "ok";
    case Rejection::kTruncated:
      return "truncated";
    case Rejection::kBadMagic:
      return "bad_magic";
    case Rejection::kMalformed:
      return "malformed";
    case Rejection::kOversized:
      return "oversized";
    case Rejection::kBadSignature:
      return "bad_signature";
    case Rejection::kWrongSession:
      return "wrong_session";
    case Rejection::kStale:
      return "stale";
    case Rejection::kFuture:
      return "future";
    case Rejection::kReplayed:
      return "replayed";
    case Rejection::kBadBodyHash:
      return "bad_body_hash";
    case Rejection::kReplayCacheFull:
      return "replay_cache_full";
  }
  return "malformed";
}

Nonce envelope_nonce(std::string_view envelope) {
  Nonce n{};
  constexpr size_t kAt = 4 + 1 + 1 + 2;
  if (envelope.size() < kAt + n.size()) throw std::invalid_argument("not a sealed envelope");
  std::copy_n(envelope.data() + kAt, n.size(), n.begin());
  return n;
}

std::string seal_envelope(CommandType type, const std::string& session, std::string_view body,
                          std::chrono::system_clock::time_point issued, const Signer& sign) {
  init_sodium();
  if (session.empty() || session.size() > kMaxSessionLength)
    throw std::invalid_argument("session id must be 1.." + std::to_string(kMaxSessionLength) + " bytes");
  if (body.size() > UINT32_MAX) throw std::invalid_argument("body too large");
  std::string out(kMagic);
  out.push_back(static_cast<char>(kVersion));
  out.push_back(static_cast<char>(type));
  put_be(out, session.size(), 2);
  Nonce nonce;
  randombytes_buf(nonce.data(), nonce.size());
  out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  put_be(out,
         static_cast<uint64_t>(
             std::chrono::duration_cast<std::chrono::milliseconds>(issued.time_since_epoch()).count()),
         8);
  put_be(out, body.size(), 4);
  unsigned char hash[kHashSize];
  crypto_hash_sha256(hash, reinterpret_cast<const unsigned char*>(body.data()), body.size());
  out.append(reinterpret_cast<const char*>(hash), sizeof(hash));
  out += session;
  const Signature sig = sign(std::string(kEnvelopeDomain) + out);
  out.append(reinterpret_cast<const char*>(sig.data()), sig.size());
  out.append(body);
  return out;
}

Rejection parse_and_verify_header(std::string_view bytes, const PublicKey& key, const VerifyLimits& limits,
                                  EnvelopeHeader& out, size_t* header_size) {
  init_sodium();
  const size_t n = std::min<size_t>(bytes.size(), kMagic.size());
  if (bytes.substr(0, n) != kMagic.substr(0, n)) return Rejection::kBadMagic;
  if (bytes.size() <= kMagic.size()) return Rejection::kTruncated;
  if (static_cast<uint8_t>(bytes[4]) != kVersion) return Rejection::kBadMagic;
  if (bytes.size() < kFixedHeaderSize) return Rejection::kTruncated;
  const uint8_t type = static_cast<uint8_t>(bytes[5]);
  const size_t session_length = get_be(bytes, 6, 2);
  if (!known_type(type) || session_length == 0 || session_length > kMaxSessionLength)
    return Rejection::kMalformed;
  const size_t signed_size = kFixedHeaderSize + session_length;
  if (bytes.size() < signed_size + kSignatureSize) return Rejection::kTruncated;

  // The signature before anything else is believed.
  std::string message(kEnvelopeDomain);
  message.append(bytes.substr(0, signed_size));
  if (crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(bytes.data() + signed_size),
                                  reinterpret_cast<const unsigned char*>(message.data()), message.size(),
                                  key.data()) != 0)
    return Rejection::kBadSignature;

  size_t at = 8;
  out.type = static_cast<CommandType>(type);
  std::copy(bytes.begin() + at, bytes.begin() + at + kNonceSize, out.nonce.begin());
  at += kNonceSize;
  out.issued_ms = static_cast<int64_t>(get_be(bytes, at, 8));
  at += 8;
  out.body_length = static_cast<uint32_t>(get_be(bytes, at, 4));
  at += 4;
  std::copy(bytes.begin() + at, bytes.begin() + at + kHashSize, out.body_sha256.begin());
  at += kHashSize;
  out.session.assign(bytes.substr(at, session_length));
  const uint32_t max = out.type == CommandType::kPut ? limits.max_put_body : limits.max_body;
  if (out.body_length > max) return Rejection::kOversized;
  if (header_size) *header_size = signed_size + kSignatureSize;
  return Rejection::kNone;
}

Rejection verify_body(const EnvelopeHeader& header, std::string_view body) {
  init_sodium();
  if (body.size() < header.body_length) return Rejection::kTruncated;
  if (body.size() > header.body_length) return Rejection::kBadBodyHash;
  unsigned char hash[kHashSize];
  crypto_hash_sha256(hash, reinterpret_cast<const unsigned char*>(body.data()), body.size());
  return sodium_memcmp(hash, header.body_sha256.data(), kHashSize) == 0 ? Rejection::kNone
                                                                        : Rejection::kBadBodyHash;
}

}  // namespace zn::command
