// The seal each exported batch ends with (issue 16): a line
//   {"zn":"audit-seal","v":1,"host":..,"first":F,"last":L,"hash":H,"count":N,
//    "digest":D,"dropped":{"first":a,"last":b,"count":n}?,"kid":K,"sig":S}
// F..L is the range of the chain the batch covers (records its sink's
// filter left out included), H the chain hash of record L (the chain head the
// batch ends at), N and D the number and digest of the records the batch
// carries (records_digest), `dropped` a range the exporter skipped because the
// sink's spool overflowed, K the signing key's id (JWK thumbprint) and S the
// Ed25519 signature (hex) by zerod's audit key over
//   "zeroness/audit-seal/v1\n" + the seal without "sig", keys sorted, no spaces.
// A receiver holding the public key checks that nothing in the batch was
// edited, dropped or reordered, and (seals chaining F = previous L + 1) that
// no batch is missing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/audit/event.h"
#include "broker/audit/store.h"
#include "broker/identity/jwk.h"
#include "broker/identity/signing_key.h"

namespace zn::broker::audit_export {

// A range of the chain skipped for one sink (its spool overflowed).
struct DroppedRange {
  uint64_t first = 0;
  uint64_t last = 0;
  uint64_t count() const { return last >= first ? last - first + 1 : 0; }
};

// SHA-256 (hex) over "<seq>:<hash>\n" of each record, in the order given.
std::string records_digest(const std::vector<AuditRecord>& records);
// The same over (seq, hash) pairs, for the verifier.
std::string records_digest(const std::vector<std::pair<uint64_t, std::string>>& seq_hashes);

// What a seal says (parsed, before or after its signature is checked).
struct Seal {
  std::string host;
  uint64_t first = 0;
  uint64_t last = 0;
  std::string hash;
  uint64_t count = 0;
  std::string digest;
  std::optional<DroppedRange> dropped;
  std::string kid;
  std::string sig;  // hex
};

class BatchSealer {
 public:
  BatchSealer(std::shared_ptr<const SigningKey> key, std::string host);
  // The seal line (no newline) for records (the batch's, in seq order) over
  // first..last whose record `last` has chain hash last_hash. Any thread.
  std::string seal(uint64_t first, uint64_t last, const std::string& last_hash,
                   const std::vector<AuditRecord>& records, const std::optional<DroppedRange>& dropped) const;
  const std::string& kid() const { return key_->kid(); }
  const Ed25519PublicKey& public_key() const { return key_->public_key(); }

 private:
  std::shared_ptr<const SigningKey> key_;
  std::string host_;
};

// True if `line` is a seal line ({"zn":"audit-seal",...}); cheap prefix check.
bool is_seal_line(std::string_view line);

// Parses a seal line and checks its signature under `public_key`. Returns the
// seal, or an error saying what is wrong (malformed, another key's, bad
// signature). Never throws on bad input.
struct SealCheck {
  std::optional<Seal> seal;
  std::string error;  // empty when seal is set
};
SealCheck check_seal(std::string_view line, const Ed25519PublicKey& public_key);

// The retention checkpoint for record seq (hash its chain hash), stamped now
// and signed by the audit key: what audit_checkpoint_signed_by checks.
AuditCheckpoint sign_audit_checkpoint(const SigningKey& key, uint64_t seq, const std::string& hash);

// True if the store's retention checkpoint (audit/store.h) is signed by
// the audit key `key` (kid and signature).
bool audit_checkpoint_signed_by(const AuditCheckpoint& cp, const Ed25519PublicKey& key);

// Hex of a public key, and back (std::nullopt unless exactly 64 hex digits).
std::string public_key_hex(const Ed25519PublicKey& key);
std::optional<Ed25519PublicKey> parse_public_key_hex(std::string_view hex);

}  // namespace zn::broker::audit_export
