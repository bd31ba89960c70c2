// Verifies an exported audit stream (a sink's file, or the lines pulled from
// JetStream) against zerod's audit public key (issue 16). Lines are fed in
// the order the receiver got them:
//  - each record's hash is recomputed from its fields (an edit shows), and
//    consecutive records must link (prev = the record before's hash);
//  - each seal's signature is checked, and its digest must equal the digest
//    of the records since the seal before (a dropped, added or reordered
//    record shows);
//  - each seal's range must start at or before the previous seal's end + 1
//    (a whole missing batch shows; a re-delivered one, at least once after a
//    restart, overlaps and must carry the same records);
//  - with an anchor SEQ:HASH (the store's head at some moment, taken out of
//    band), the sealed stream must reach SEQ (a truncated tail shows) and, if
//    record SEQ was exported or a seal ends there, its hash must be HASH.
// A range the exporter declared dropped (its spool overflowed) is signed,
// so it is reported, not failed, unless `strict` says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "broker/audit/event.h"
#include "broker/audit_export/batch_seal.h"

namespace zn::broker::audit_export {

struct ExportAnchor {
  uint64_t seq = 0;
  std::string hash;
};
// "SEQ:HASH" (HASH 64 lowercase hex); std::nullopt otherwise.
std::optional<ExportAnchor> parse_export_anchor(std::string_view text);

struct ExportVerifyResult {
  bool ok = true;
  std::string reason;      // why not ok: names the line and the seq
  uint64_t line = 0;       // 1-based line the failure is on (0: at the end)
  uint64_t records = 0;    // records sealed and verified
  uint64_t seals = 0;      // seals verified
  uint64_t first_seq = 0;  // the range the seals cover
  uint64_t last_seq = 0;
  uint64_t redelivered = 0;           // records seen again (at least once)
  uint64_t torn = 0;                  // records of an unsealed batch a re-delivery replaced
  std::vector<DroppedRange> dropped;  // declared by zerod
  std::string last_hash;              // chain hash at last_seq (from the last seal)
};

class ExportVerifier {
 public:
  struct Options {
    Ed25519PublicKey public_key{};
    std::optional<ExportAnchor> anchor;
    bool strict = false;  // declared drops fail too
    std::string host;     // when set, every seal must name this host
  };
  explicit ExportVerifier(Options options);

  // One line (no newline; blank lines are skipped): exactly the JSON object
  // the exporter wrote, nothing around it and no control byte in it. Returns
  // false once the stream has failed; further lines are ignored.
  bool feed(std::string_view line);
  // The verdict, after the last line (the unsealed tail and the anchor are
  // checked here).
  ExportVerifyResult finish();

 private:
  bool fail(std::string reason);
  bool on_record(const AuditRecord& record);
  bool on_seal(const Seal& seal);

  Options options_;
  ExportVerifyResult result_;
  uint64_t line_ = 0;
  std::vector<AuditRecord> pending_;                // records since the last seal
  std::optional<std::string> pending_ocsf_host_;    // device.hostname of their OCSF lines
  uint64_t sealed_to_ = 0;                          // last seq covered by a verified seal (0: none yet)
  std::unordered_map<uint64_t, std::string> seen_;  // seq -> hash of every sealed record
  bool finished_ = false;
};

}  // namespace zn::broker::audit_export
