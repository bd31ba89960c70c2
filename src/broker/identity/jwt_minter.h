// Mints the per-request identity zerod injects upstream (issue 12): an
// EdDSA (Ed25519) JWT naming the session, bound to one upstream host, one
// method and one normalised path, living at most an hour (60 s by default),
// so a token that leaks from an upstream's logs is worth one request shape
// for a minute. The format is in jwt_claims.h; receivers check it with
// jwt_verifier.h against jwks().
//
// Keys rotate without breaking a token in flight. Three kinds of key are
// published in jwks():
//   - current: signs every token minted now;
//   - next:    made at the previous rotation and published since, so a
//              receiver that caches the key set already knows the key the
//              next rotation switches to;
//   - retired: keys that signed before a rotation, kept until every token
//              they signed has expired (retired_at + token lifetime), then
//              dropped (prune(), rotate(), and jwks() leaves them out).
//
// Threads: mint() runs on the proxy's I/O loops, any number at once. It holds
// the minter's lock only to copy the current key's pointer and read the
// clock, never across signing, I/O or key generation; keys are made by
// rotate() on a control thread, outside that lock.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "broker/identity/signing_key.h"

namespace zn::broker {

// What one token is for. Views: they need only outlive the mint() call.
struct MintRequest {
  std::string_view session_id;  // "sub"
  std::string_view audience;    // "aud": the upstream host the policy matched
  std::string_view method;      // as sent: methods are case-sensitive (RFC 9110 section 9.1)
  std::string_view path;        // http::normalise_target's path: starts with '/', no query
};

enum class MintError {
  kNone,
  kInvalidRequest,  // an empty field, a method that is not a token, a path without '/', bad UTF-8
};

struct MintResult {
  std::string token;  // the compact JWS, set exactly when ok()
  MintError error = MintError::kNone;
  std::string message;  // why, when not ok(); names the field, never its value
  bool ok() const { return error == MintError::kNone; }
};

struct JwtMinterOptions {
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  using KeyMaker = std::function<std::shared_ptr<const SigningKey>()>;

  // exp - iat. At most an hour: the point of the token is that it is short-lived.
  std::chrono::seconds token_lifetime{60};
  // How long a key is current before rotate_if_due() replaces it. At least
  // token_lifetime, so automatic rotation keeps at most four keys published.
  std::chrono::seconds key_lifetime{std::chrono::hours(24)};
  // Empty: std::chrono::system_clock::now. Called under the minter's lock,
  // so it must not block. Tests inject one they move.
  Clock clock;
  // Empty: SigningKey::generate. Tests inject known keys.
  KeyMaker make_key;
};

class JwtMinter {
 public:
  static constexpr std::chrono::seconds kMinTokenLifetime{1};
  static constexpr std::chrono::seconds kMaxTokenLifetime{3600};

  // Makes the current and the next key. Throws std::invalid_argument for an
  // empty issuer or options out of range; std::runtime_error if keys cannot
  // be made.
  explicit JwtMinter(std::string issuer, JwtMinterOptions options = {});

  JwtMinter(const JwtMinter&) = delete;
  JwtMinter& operator=(const JwtMinter&) = delete;

  // One token for the request, signed by the current key. Never blocks
  // (beyond the short lock above) and never throws on bad input. Any thread.
  MintResult mint(const MintRequest& request) const;

  // The next key becomes current, the current one retires, a new next key is
  // made, and retired keys whose tokens have all expired are dropped. Key
  // generation: control thread only.
  void rotate();
  // rotate() if the current key has been current for key_lifetime; true if
  // it rotated. For a control thread's timer.
  bool rotate_if_due();
  // Drops the retired keys whose tokens have all expired. Any thread.
  void prune();

  // {"keys":[current, next, retired...]}: the public JWKs of every key a
  // valid token can name. Any thread; builds the JSON outside the lock.
  nlohmann::json jwks() const;

  std::string current_kid() const;
  const std::string& issuer() const { return issuer_; }
  std::chrono::seconds token_lifetime() const { return token_lifetime_; }

 private:
  using TimePoint = std::chrono::system_clock::time_point;

  // A key with its encoded JWS header, which is the same for every token it
  // signs. Immutable and shared: mint() signs with a copy of the pointer.
  struct Signer {
    std::shared_ptr<const SigningKey> key;
    std::string encoded_header;  // base64url of {"alg","kid","typ"}
  };
  struct Retired {
    std::shared_ptr<const Signer> signer;
    TimePoint retired_at;
  };

  std::shared_ptr<const Signer> make_signer() const;
  void rotate_holding_rotation_lock();
  // Whether every token r's key signed has expired at now.
  bool spent(const Retired& r, TimePoint now) const;
  // Moves the spent retired keys out, for the caller to drop after
  // unlocking (freeing guarded pages unmaps them). Needs mu_.
  std::vector<Retired> take_spent(TimePoint now);

  const std::string issuer_;
  const std::chrono::seconds token_lifetime_;
  const std::chrono::seconds key_lifetime_;
  const JwtMinterOptions::Clock clock_;
  const JwtMinterOptions::KeyMaker make_key_;

  // Serialises rotations on the control side (rotate_if_due's check and
  // rotation are one step); held across key generation, so never taken by
  // mint(), jwks() or prune(). Taken before mu_.
  std::mutex rotation_mu_;

  // Guards what follows; held only to copy or swap pointers and read the clock.
  mutable std::mutex mu_;
  std::shared_ptr<const Signer> current_;
  std::shared_ptr<const Signer> next_;
  TimePoint current_since_;
  std::vector<Retired> retired_;  // oldest first
};

}  // namespace zn::broker
