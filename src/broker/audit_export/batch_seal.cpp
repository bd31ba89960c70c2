#include "broker/audit_export/batch_seal.h"

#include <sodium.h>

#include <chrono>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "broker/audit/chain.h"

namespace zn::broker::audit_export {

namespace {

constexpr std::string_view kSealDomain = "zeroness/audit-seal/v1\n";
constexpr std::string_view kSealPrefix = R"({"zn":"audit-seal")";

std::string to_hex(const unsigned char* p, size_t n) {
  std::string out(n * 2 + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), p, n);
  out.pop_back();
  return out;
}

bool is_lower_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The signed bytes: the seal object without "sig", keys sorted (nlohmann's
// default object is a std::map), no whitespace.
std::string signed_message(nlohmann::json unsigned_seal) {
  unsigned_seal.erase("sig");
  return std::string(kSealDomain) + unsigned_seal.dump();
}

}  // namespace

std::string records_digest(const std::vector<std::pair<uint64_t, std::string>>& seq_hashes) {
  std::string text;
  text.reserve(seq_hashes.size() * 80);
  for (const auto& [seq, hash] : seq_hashes) {
    text += std::to_string(seq);
    text += ':';
    text += hash;
    text += '\n';
  }
  return sha256_hex(text);
}

std::string records_digest(const std::vector<AuditRecord>& records) {
  std::vector<std::pair<uint64_t, std::string>> pairs;
  pairs.reserve(records.size());
  for (const AuditRecord& r : records) pairs.emplace_back(r.seq, r.hash);
  return records_digest(pairs);
}

BatchSealer::BatchSealer(std::shared_ptr<const SigningKey> key, std::string host)
    : key_(std::move(key)), host_(std::move(host)) {
  if (!key_) throw std::invalid_argument("batch sealer: no key");
}

std::string BatchSealer::seal(uint64_t first, uint64_t last, const std::string& last_hash,
                              const std::vector<AuditRecord>& records,
                              const std::optional<DroppedRange>& dropped) const {
  nlohmann::json s = {{"zn", "audit-seal"},
                      {"v", 1},
                      {"host", host_},
                      {"first", first},
                      {"last", last},
                      {"hash", last_hash},
                      {"count", records.size()},
                      {"digest", records_digest(records)},
                      {"kid", key_->kid()}};
  if (dropped)
    s["dropped"] = {{"first", dropped->first}, {"last", dropped->last}, {"count", dropped->count()}};
  const SigningKey::Signature sig = key_->sign(signed_message(s));
  s["sig"] = to_hex(sig.data(), sig.size());
  // "zn" first so a reader can tell a seal from a record by its prefix.
  nlohmann::ordered_json out = {{"zn", "audit-seal"}};
  for (const auto& [k, v] : s.items())
    if (k != "zn") out[k] = v;
  return out.dump();
}

bool is_seal_line(std::string_view line) { return line.substr(0, kSealPrefix.size()) == kSealPrefix; }

SealCheck check_seal(std::string_view line, const Ed25519PublicKey& public_key) {
  SealCheck out;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("zn", "") != "audit-seal") {
    out.error = "not a seal";
    return out;
  }
  if (!j.contains("v") || j["v"] != 1) {
    out.error = "seal: unknown version";
    return out;
  }
  auto u64 = [&](const nlohmann::json& o, const char* k, uint64_t& v) {
    if (!o.contains(k) || !o[k].is_number_unsigned()) return false;
    v = o[k].get<uint64_t>();
    return true;
  };
  auto str = [&](const char* k, std::string& v) {
    if (!j.contains(k) || !j[k].is_string()) return false;
    v = j[k].get<std::string>();
    return true;
  };
  Seal s;
  if (!str("host", s.host) || !u64(j, "first", s.first) || !u64(j, "last", s.last) || !str("hash", s.hash) ||
      !u64(j, "count", s.count) || !str("digest", s.digest) || !str("kid", s.kid) || !str("sig", s.sig) ||
      !is_lower_hex(s.hash, 64) || !is_lower_hex(s.digest, 64) || !is_lower_hex(s.sig, 128) || s.first == 0 ||
      s.first > s.last) {
    out.error = "seal: malformed";
    return out;
  }
  if (j.contains("dropped")) {
    DroppedRange d;
    uint64_t count = 0;
    const nlohmann::json& dj = j["dropped"];
    if (!dj.is_object() || !u64(dj, "first", d.first) || !u64(dj, "last", d.last) ||
        !u64(dj, "count", count) || d.first == 0 || d.first > d.last || count != d.count() ||
        d.first < s.first || d.last > s.last) {
      out.error = "seal: malformed dropped range";
      return out;
    }
    s.dropped = d;
  }
  if (s.kid != jwk_thumbprint(public_key)) {
    out.error = "seal: signed by another key (kid " + s.kid + ")";
    return out;
  }
  unsigned char sig[crypto_sign_BYTES];
  if (sodium_hex2bin(sig, sizeof sig, s.sig.data(), s.sig.size(), nullptr, nullptr, nullptr) != 0) {
    out.error = "seal: malformed";
    return out;
  }
  const std::string msg = signed_message(j);
  if (crypto_sign_verify_detached(sig, reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
                                  public_key.data()) != 0) {
    out.error = "seal: bad signature";
    return out;
  }
  out.seal = std::move(s);
  return out;
}

AuditCheckpoint sign_audit_checkpoint(const SigningKey& key, uint64_t seq, const std::string& hash) {
  AuditCheckpoint cp;
  cp.seq = seq;
  cp.hash = hash;
  cp.ts = format_audit_ts(std::chrono::system_clock::now());
  cp.kid = key.kid();
  const SigningKey::Signature sig = key.sign(audit_checkpoint_message(cp));
  cp.sig = to_hex(sig.data(), sig.size());
  return cp;
}

bool audit_checkpoint_signed_by(const AuditCheckpoint& cp, const Ed25519PublicKey& key) {
  if (cp.kid != jwk_thumbprint(key) || cp.sig.size() != 2 * crypto_sign_BYTES) return false;
  unsigned char sig[crypto_sign_BYTES];
  if (sodium_hex2bin(sig, sizeof sig, cp.sig.data(), cp.sig.size(), nullptr, nullptr, nullptr) != 0)
    return false;
  const std::string msg = audit_checkpoint_message(cp);
  return crypto_sign_verify_detached(sig, reinterpret_cast<const unsigned char*>(msg.data()), msg.size(),
                                     key.data()) == 0;
}

std::string public_key_hex(const Ed25519PublicKey& key) { return to_hex(key.data(), key.size()); }

std::optional<Ed25519PublicKey> parse_public_key_hex(std::string_view hex) {
  if (!is_lower_hex(hex, 64)) return std::nullopt;
  Ed25519PublicKey key{};
  if (sodium_hex2bin(key.data(), key.size(), hex.data(), hex.size(), nullptr, nullptr, nullptr) != 0)
    return std::nullopt;
  return key;
}

}  // namespace zn::broker::audit_export
