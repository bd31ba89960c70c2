// Sealing values at rest under the host key: XChaCha20-Poly1305 (IETF AEAD,
// libsodium) with a random 24-byte nonce per seal, so sealing the same value
// twice gives unrelated envelopes. An envelope is one line of text, safe in
// JSON:
//
//   znsealed:v1:<key id>:<base64url, no padding, of nonce || ciphertext+tag>
//
// The associated data is the envelope's header ("znsealed:v1:<key id>:")
// followed by a caller's context naming where the value belongs (e.g.
// "session/<id>/resource/<name>/<field>"): an envelope copied to another
// field or session, or with its header edited, does not open.
//
// Opening never throws on bad input (the state file is input) and returns
// what was wrong; messages carry key ids, the version and the context, never
// plaintext or key bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "broker/secrets/host_key.h"
#include "broker/secrets/secret.h"

namespace zn::broker {

enum class UnsealError {
  kNone,
  kNotAnEnvelope,         // no znsealed: prefix, a malformed header, bad base64, too short
  kUnknownVersion,        // a format this build does not read
  kWrongKey,              // sealed under another host key (the message names both ids)
  kAuthenticationFailed,  // the right key, but another context or altered bytes
};

std::string_view to_string(UnsealError);

struct Unsealed {
  std::optional<Secret> value;  // set exactly when ok()
  UnsealError error = UnsealError::kNone;
  std::string message;  // why, when not ok()
  bool ok() const { return error == UnsealError::kNone; }
};

struct Resealed {
  std::string envelope;  // set exactly when ok()
  UnsealError error = UnsealError::kNone;
  std::string message;
  bool ok() const { return error == UnsealError::kNone; }
};

// Seals plaintext for context. Throws only if libsodium cannot start.
std::string seal(const HostKey& key, std::string_view plaintext, std::string_view context);
std::string seal(const HostKey& key, const Secret& value, std::string_view context);

// Opens an envelope sealed by seal(key, ..., context); the value goes
// straight into guarded pages. Any thread.
Unsealed unseal(const HostKey& key, std::string_view envelope, std::string_view context);

// Key rotation: opens under `from` and seals under `to`, for the same
// context. An envelope already under `to` (a rotation resumed after a crash)
// is checked to open and returned as it is.
Resealed reseal(const HostKey& from, const HostKey& to, std::string_view envelope, std::string_view context);

}  // namespace zn::broker
