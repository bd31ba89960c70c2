#include "broker/identity/jwt_minter.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <utility>

#include "broker/identity/base64url.h"
#include "broker/identity/jwt_claims.h"

namespace zn::broker {
namespace {

// 128 bits: unique across every token any zerod mints, without coordination.
constexpr std::size_t kTokenIdBytes = 16;

MintResult invalid(std::string message) { return {{}, MintError::kInvalidRequest, std::move(message)}; }

// RFC 9110 section 5.6.2: a method is a token. Checked so a token never
// binds a "method" no request can have.
bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// Why the request cannot be minted for, or empty. Names the field only: the
// values come from the guest's request.
std::string request_problem(const MintRequest& r) {
  if (r.session_id.empty()) return "empty session id";
  if (r.audience.empty()) return "empty audience";
  if (!is_token(r.method)) return "the method is not an HTTP token";
  if (r.path.empty() || r.path.front() != '/') return "the path does not start with '/'";
  return {};
}

std::int64_t numeric_date(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

JwtMinter::JwtMinter(std::string issuer, JwtMinterOptions options)
    : issuer_(std::move(issuer)),
      token_lifetime_(options.token_lifetime),
      key_lifetime_(options.key_lifetime),
      clock_(options.clock ? std::move(options.clock) : [] { return std::chrono::system_clock::now(); }),
      make_key_(options.make_key ? std::move(options.make_key) : &SigningKey::generate) {
  if (issuer_.empty()) throw std::invalid_argument("jwt minter: empty issuer");
  if (token_lifetime_ < kMinTokenLifetime || token_lifetime_ > kMaxTokenLifetime)
    throw std::invalid_argument("jwt minter: token lifetime " + std::to_string(token_lifetime_.count()) +
                                " s is outside " + std::to_string(kMinTokenLifetime.count()) + ".." +
                                std::to_string(kMaxTokenLifetime.count()) + " s");
  if (key_lifetime_ < token_lifetime_)
    throw std::invalid_argument("jwt minter: key lifetime " + std::to_string(key_lifetime_.count()) +
                                " s is shorter than the token lifetime " +
                                std::to_string(token_lifetime_.count()) + " s");
  current_ = make_signer();
  next_ = make_signer();
  current_since_ = clock_();
}

std::shared_ptr<const JwtMinter::Signer> JwtMinter::make_signer() const {
  auto key = make_key_();
  if (!key) throw std::runtime_error("jwt minter: no signing key was made");
  const nlohmann::json header = {
      {"alg", jwt_claims::kAlgorithm}, {"kid", key->kid()}, {"typ", jwt_claims::kType}};
  std::string encoded_header = base64url_encode(header.dump());
  return std::make_shared<const Signer>(Signer{std::move(key), std::move(encoded_header)});
}

MintResult JwtMinter::mint(const MintRequest& request) const {
  if (std::string problem = request_problem(request); !problem.empty()) return invalid(std::move(problem));

  // The clock is read under the same lock as the key: a token's iat is then
  // never later than its key's retirement, which is what lets a retired key
  // go once retired_at + token lifetime has passed.
  std::shared_ptr<const Signer> signer;
  TimePoint now;
  {
    std::lock_guard lock(mu_);
    signer = current_;
    now = clock_();
  }

  std::array<unsigned char, kTokenIdBytes> token_id{};
  randombytes_buf(token_id.data(), token_id.size());
  const std::int64_t issued_at = numeric_date(now);
  const nlohmann::json claims = {
      {jwt_claims::kIssuer, issuer_},
      {jwt_claims::kSubject, request.session_id},
      {jwt_claims::kAudience, request.audience},
      {jwt_claims::kMethod, request.method},
      {jwt_claims::kPath, request.path},
      {jwt_claims::kIssuedAt, issued_at},
      {jwt_claims::kNotBefore, issued_at},
      {jwt_claims::kExpiry, issued_at + token_lifetime_.count()},
      {jwt_claims::kTokenId, base64url_encode(token_id)},
  };
  std::string payload;
  try {
    payload = claims.dump();  // throws only on invalid UTF-8 in a field
  } catch (const nlohmann::json::exception&) {
    return invalid("a field is not valid UTF-8");
  }

  MintResult result;
  result.token.reserve(signer->encoded_header.size() + payload.size() * 4 / 3 + 96);
  result.token += signer->encoded_header;
  result.token += '.';
  result.token += base64url_encode(payload);
  const SigningKey::Signature signature = signer->key->sign(result.token);
  result.token += '.';
  result.token += base64url_encode(signature);
  return result;
}

bool JwtMinter::spent(const Retired& r, TimePoint now) const {
  // Every token r's key signed has iat <= retired_at (see mint) and so
  // exp <= retired_at + token lifetime; a verifier accepts none of them
  // once now reaches exp.
  return now > r.retired_at + token_lifetime_;
}

std::vector<JwtMinter::Retired> JwtMinter::take_spent(TimePoint now) {
  std::vector<Retired> spent_keys;
  auto keep = std::stable_partition(retired_.begin(), retired_.end(),
                                    [&](const Retired& r) { return !spent(r, now); });
  std::move(keep, retired_.end(), std::back_inserter(spent_keys));
  retired_.erase(keep, retired_.end());
  return spent_keys;
}

void JwtMinter::rotate() {
  std::lock_guard rotation(rotation_mu_);
  rotate_holding_rotation_lock();
}

bool JwtMinter::rotate_if_due() {
  std::lock_guard rotation(rotation_mu_);
  {
    std::lock_guard lock(mu_);
    if (clock_() - current_since_ < key_lifetime_) return false;
  }
  rotate_holding_rotation_lock();
  return true;
}

void JwtMinter::rotate_holding_rotation_lock() {
  auto fresh = make_signer();  // key generation, outside mu_
  std::vector<Retired> dropped;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_();
    retired_.push_back({std::move(current_), now});
    current_ = std::move(next_);
    current_since_ = now;
    next_ = std::move(fresh);
    dropped = take_spent(now);
  }
}  // the dropped keys are freed here, after mu_ is released

void JwtMinter::prune() {
  std::vector<Retired> dropped;
  std::lock_guard lock(mu_);
  dropped = take_spent(clock_());
}

nlohmann::json JwtMinter::jwks() const {
  std::vector<std::shared_ptr<const Signer>> published;
  {
    std::lock_guard lock(mu_);
    const TimePoint now = clock_();
    published = {current_, next_};
    for (auto it = retired_.rbegin(); it != retired_.rend(); ++it)
      if (!spent(*it, now)) published.push_back(it->signer);
  }
  nlohmann::json keys = nlohmann::json::array();
  for (const auto& signer : published) keys.push_back(signer->key->jwk());
  return {{"keys", std::move(keys)}};
}

std::string JwtMinter::current_kid() const {
  std::lock_guard lock(mu_);
  return current_->key->kid();
}

}  // namespace zn::broker
