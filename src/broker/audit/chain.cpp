#include "broker/audit/chain.h"

#include <memory>
#include <stdexcept>

#include <openssl/evp.h>

namespace zn::broker {

const std::string& audit_genesis_hash() {
  static const std::string zeros(64, '0');
  return zeros;
}

std::string sha256_hex(std::string_view data) {
  // The digest fetched once and a context per thread, reused: OpenSSL 3's
  // implicit fetch (EVP_sha256 into EVP_DigestInit_ex) and a new context per
  // call were a tenth of the audit writer's time per record (issue 31).
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  thread_local const std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                                                 EVP_MD_CTX_free);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!sha256 || !ctx || EVP_DigestInit_ex2(ctx.get(), sha256, nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx.get(), md, &len) != 1 || len != 32)
    throw std::runtime_error("audit: SHA-256 failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '\0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 0xF];
  }
  return out;
}

std::string audit_chain_hash(const std::string& prev, const AuditRecord& rec) {
  return sha256_hex(prev + rec.canonical_payload());
}

bool AuditChainVerifier::fail(uint64_t seq, std::string reason) {
  result_.ok = false;
  result_.first_bad_seq = seq;
  result_.reason = std::move(reason);
  return false;
}

bool AuditChainVerifier::feed(const AuditRawRow& row) {
  if (!result_.ok) return false;
  const uint64_t want = expected_seq_;
  if (row.seq < 0 || static_cast<uint64_t>(row.seq) != want) {
    if (row.seq > 0 && static_cast<uint64_t>(row.seq) > want)
      return fail(want, "seq gap: record " + std::to_string(want) + " missing (next is " +
                            std::to_string(row.seq) + ")");
    return fail(want, "unexpected seq " + std::to_string(row.seq) + " where " + std::to_string(want) +
                          " was expected");
  }
  if (row.prev != prev_) return fail(want, "prev link broken: does not match hash of previous record");

  AuditRecord rec;
  rec.seq = want;
  rec.ts = row.ts;
  rec.event = row.event;
  rec.sid = row.sid;
  try {
    rec.detail = nlohmann::json::parse(row.detail);
  } catch (const nlohmann::json::exception&) {
    return fail(want, "detail is not valid JSON");
  }
  if (!rec.detail.is_object()) return fail(want, "detail is not a JSON object");
  std::string computed;
  try {
    computed = audit_chain_hash(prev_, rec);
  } catch (const std::exception&) {
    return fail(want, "record cannot be serialised");
  }
  if (computed != row.hash) return fail(want, "hash mismatch: record content was altered");
  if (!is_audit_event_name(row.event)) return fail(want, "unknown event name");

  prev_ = row.hash;
  ++expected_seq_;
  ++result_.records;
  return true;
}

}  // namespace zn::broker
