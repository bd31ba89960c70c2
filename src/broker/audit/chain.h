// The hash chain: hash = SHA-256(prev_hex || canonical_payload), where prev_hex
// is the previous record's hash as 64 lowercase hex characters (64 '0's before
// the first record) and canonical_payload is AuditRecord::canonical_payload().
// Hashing the hex text (not the raw digest) keeps the chain checkable with
// shell tools: printf '%s%s' "$prev" "$payload" | sha256sum.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "broker/audit/event.h"

namespace zn::broker {

// 64 '0's: the prev of record 1.
const std::string& audit_genesis_hash();

// Lowercase hex SHA-256 (OpenSSL EVP). Throws std::runtime_error on failure.
std::string sha256_hex(std::string_view data);

// hash of a record given its prev and payload fields (ignores rec.hash).
std::string audit_chain_hash(const std::string& prev, const AuditRecord& rec);

struct AuditVerifyResult {
  bool ok = true;
  uint64_t records = 0;  // records checked before stopping
  std::optional<uint64_t> first_bad_seq;
  std::optional<uint64_t>
      checkpoint_seq;  // verified from a retention checkpoint (its signature is the caller's to check)
  std::string reason;  // empty when ok
};

// A row as read from the store, before any parsing: verification must cope
// with anything a tamperer could have written.
struct AuditRawRow {
  int64_t seq = 0;
  std::string ts, event, sid, detail, prev, hash;
};

// Walks rows in ascending seq order, stopping at the first bad one.
class AuditChainVerifier {
 public:
  AuditChainVerifier() = default;
  // Starts after a retention checkpoint: the first row must be seq + 1 and
  // link to hash.
  AuditChainVerifier(uint64_t seq, std::string hash) : expected_seq_(seq + 1), prev_(std::move(hash)) {}
  // Returns false (and fills result()) at the first bad row; further rows are ignored.
  bool feed(const AuditRawRow& row);
  const AuditVerifyResult& result() const { return result_; }

 private:
  bool fail(uint64_t seq, std::string reason);
  uint64_t expected_seq_ = 1;
  std::string prev_ = audit_genesis_hash();
  AuditVerifyResult result_;
};

}  // namespace zn::broker
