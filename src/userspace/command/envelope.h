// The signed envelope of a command to the in-sandbox agent (issue 15).
//
// zerod is the only signer; the agent verifies every envelope before it
// runs anything. The layout is fixed and binary (big-endian), so the parser
// the agent exposes to whoever can reach its transport is a few bounds
// checks, not a JSON parser:
//
//   magic "ZNC1" | version u8 (1) | type u8 | session length u16
//   nonce [16] | issued (unix ms) u64 | body length u32 | body SHA-256 [32]
//   session [length] | Ed25519 signature [64] | body [body length]
//
// The signature covers the domain string "zeroness/command/v1" followed by
// every header byte before it (magic to session), so the body is bound by
// its hash and can be checked as it streams in after the header.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace zn::command {

// kRekey: the agent pins a new key (zerod's rotation), signed by the old one.
enum class CommandType : uint8_t { kPing = 1, kExec = 2, kPut = 3, kGet = 4, kRekey = 5 };
std::string_view command_type_name(CommandType t);

inline constexpr size_t kNonceSize = 16;
inline constexpr size_t kHashSize = 32;
inline constexpr size_t kSignatureSize = 64;
inline constexpr size_t kPublicKeySize = 32;
inline constexpr size_t kMaxSessionLength = 64;
// The fixed part before the session id, and the most a header can be.
inline constexpr size_t kFixedHeaderSize = 4 + 1 + 1 + 2 + kNonceSize + 8 + 4 + kHashSize;
inline constexpr size_t kMaxHeaderSize = kFixedHeaderSize + kMaxSessionLength + kSignatureSize;

using Nonce = std::array<unsigned char, kNonceSize>;
using PublicKey = std::array<unsigned char, kPublicKeySize>;
using Signature = std::array<unsigned char, kSignatureSize>;

struct EnvelopeHeader {
  CommandType type = CommandType::kPing;
  std::string session;
  Nonce nonce{};
  int64_t issued_ms = 0;  // unix time
  uint32_t body_length = 0;
  std::array<unsigned char, kHashSize> body_sha256{};
};

// Signs the bytes it is given (the domain string and the header); zerod's
// key, which never leaves it.
using Signer = std::function<Signature(std::string_view message)>;

// The whole envelope for `body`: a fresh random nonce, `issued` as given.
std::string seal_envelope(CommandType type, const std::string& session, std::string_view body,
                          std::chrono::system_clock::time_point issued, const Signer& sign);

// The nonce of a sealed envelope (what its reply is sealed for).
Nonce envelope_nonce(std::string_view envelope);

// Why an envelope was refused. Each is reported back and audited
// (command:reject) by name.
enum class Rejection {
  kNone,
  kTruncated,       // fewer bytes than the header (or body) says
  kBadMagic,        // not an envelope, or another version
  kMalformed,       // an unknown type, a session id out of bounds
  kOversized,       // the body is over the limit for its type
  kBadSignature,    // not signed by the pinned key (tampered, another key)
  kWrongSession,    // signed for another sandbox
  kStale,           // issued before the freshness window
  kFuture,          // issued after it
  kReplayed,        // a nonce already seen within the window
  kBadBodyHash,     // the body is not the one signed
  kReplayCacheFull  // too many fresh envelopes to remember: refused rather than forgotten
};
std::string_view rejection_name(Rejection r);

struct VerifyLimits {
  std::chrono::milliseconds window{30000};  // |now - issued| at most
  uint32_t max_body = 64 * 1024;            // ping, exec, get
  uint32_t max_put_body = 16 * 1024 * 1024;
};

// The header alone, signature checked: what the agent does before it reads
// (or buffers) a body. `bytes` starts at the magic; on success *header_size
// is where the body begins. Pure: freshness and replay are the caller's
// (verify_fresh), since they need a clock and memory.
Rejection parse_and_verify_header(std::string_view bytes, const PublicKey& key, const VerifyLimits& limits,
                                  EnvelopeHeader& out, size_t* header_size);

// The body against the signed hash.
Rejection verify_body(const EnvelopeHeader& header, std::string_view body);

}  // namespace zn::command
