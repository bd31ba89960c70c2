#include "broker/audit_export/export_verifier.h"

#include "broker/audit/chain.h"
#include "broker/audit_export/export_format.h"

namespace zn::broker::audit_export {

std::optional<ExportAnchor> parse_export_anchor(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 20) return std::nullopt;
  ExportAnchor a;
  for (char c : text.substr(0, colon)) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t next = a.seq * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != a.seq) return std::nullopt;  // overflow
    a.seq = next;
  }
  a.hash = std::string(text.substr(colon + 1));
  if (a.seq == 0 || a.hash.size() != 64) return std::nullopt;
  for (char c : a.hash)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return a;
}

ExportVerifier::ExportVerifier(Options options) : options_(std::move(options)) {}

bool ExportVerifier::fail(std::string reason) {
  if (!result_.ok) return false;
  result_.ok = false;
  result_.line = line_;
  result_.reason = std::move(reason);
  return false;
}

bool ExportVerifier::feed(std::string_view line) {
  if (!result_.ok || finished_) return false;
  ++line_;
  if (line.empty()) return true;
  // Exported lines are exactly what the exporter wrote: one JSON object,
  // no byte around it and no control byte in it (its writer escapes them).
  // A JSON reader forgives what is around a value (whitespace; a NUL ends a
  // C string), so a changed separator or trailing byte would verify.
  if (line.front() != '{' || line.back() != '}')
    return fail("not an exported line (bytes around its object)");
  for (const char c : line)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return fail("not an exported line (a control byte)");
  if (is_seal_line(line)) {
    SealCheck check = check_seal(line, options_.public_key);
    if (!check.seal) return fail(check.error);
    return on_seal(*check.seal);
  }
  std::string error;
  std::optional<std::string> ocsf_host;
  std::optional<AuditRecord> rec = parse_exported_record(line, &error, &ocsf_host);
  if (!rec) return fail(error);
  if (ocsf_host) {
    // Checked against the seal's host when the seal comes.
    if (!pending_ocsf_host_) pending_ocsf_host_ = ocsf_host;
    if (*pending_ocsf_host_ != *ocsf_host)
      return fail("seq " + std::to_string(rec->seq) + ": another host's OCSF line");
  }
  return on_record(*rec);
}

bool ExportVerifier::on_record(const AuditRecord& r) {
  const std::string seq = "seq " + std::to_string(r.seq);
  if (r.seq == 0) return fail("record with seq 0");
  if (audit_chain_hash(r.prev, r) != r.hash)
    return fail(seq + ": edited (its hash does not match its fields)");
  if (!pending_.empty() && r.seq <= pending_.back().seq) {
    // The batch before was cut off before its seal (a crash mid-write) and
    // is being delivered again: what it carried is not verified, and is
    // replaced by what follows.
    result_.torn += pending_.size();
    pending_.clear();
    pending_ocsf_host_.reset();
  }
  if (!pending_.empty() && r.seq == pending_.back().seq + 1 && r.prev != pending_.back().hash)
    return fail(seq + ": does not follow seq " + std::to_string(pending_.back().seq) + " (prev differs)");
  pending_.push_back(r);
  return true;
}

bool ExportVerifier::on_seal(const Seal& s) {
  const std::string range = "seal " + std::to_string(s.first) + ".." + std::to_string(s.last);
  if (!options_.host.empty() && s.host != options_.host)
    return fail(range + ": from host " + s.host + ", not " + options_.host);
  if (pending_ocsf_host_ && *pending_ocsf_host_ != s.host)
    return fail(range + ": its OCSF lines name host " + *pending_ocsf_host_ + ", it is from " + s.host);
  if (s.count != pending_.size())
    return fail(range + ": carries " + std::to_string(s.count) + " records, " +
                std::to_string(pending_.size()) + " precede it (a record was dropped or added)");
  if (records_digest(pending_) != s.digest)
    return fail(range + ": the records before it are not the ones it sealed (edited, reordered or replaced)");
  for (const AuditRecord& r : pending_) {
    if (r.seq < s.first || r.seq > s.last)
      return fail(range + ": seq " + std::to_string(r.seq) + " outside it");
    if (s.dropped && r.seq >= s.dropped->first && r.seq <= s.dropped->last)
      return fail(range + ": seq " + std::to_string(r.seq) + " inside its dropped range");
  }
  if (!pending_.empty() && pending_.back().seq == s.last && pending_.back().hash != s.hash)
    return fail(range + ": its chain head is not its last record's hash");
  if (sealed_to_ != 0 && s.first > sealed_to_ + 1)
    return fail(range + ": seqs " + std::to_string(sealed_to_ + 1) + ".." + std::to_string(s.first - 1) +
                " are missing (no seal covers them)");
  // A re-delivered range must carry what was delivered the first time.
  for (const AuditRecord& r : pending_) {
    auto it = seen_.find(r.seq);
    if (it == seen_.end()) {
      seen_.emplace(r.seq, r.hash);
    } else if (it->second != r.hash) {
      return fail(range + ": seq " + std::to_string(r.seq) + " differs from its earlier delivery");
    } else {
      ++result_.redelivered;
    }
  }
  if (s.dropped) {
    if (options_.strict)
      return fail(range + ": zerod dropped seqs " + std::to_string(s.dropped->first) + ".." +
                  std::to_string(s.dropped->last) + " (the sink's spool overflowed)");
    result_.dropped.push_back(*s.dropped);
  }
  if (result_.seals == 0) result_.first_seq = s.first;
  ++result_.seals;
  result_.records += pending_.size();
  if (s.last > sealed_to_) {
    sealed_to_ = s.last;
    result_.last_seq = s.last;
    result_.last_hash = s.hash;
  }
  seen_.emplace(s.last, s.hash);  // the chain head at the seal's end, for the anchor
  pending_.clear();
  pending_ocsf_host_.reset();
  return true;
}

ExportVerifyResult ExportVerifier::finish() {
  if (finished_ || !result_.ok) {
    finished_ = true;
    return result_;
  }
  finished_ = true;
  line_ = 0;
  if (!pending_.empty())
    fail(std::to_string(pending_.size()) + " records after the last seal (from seq " +
         std::to_string(pending_.front().seq) + ") are not sealed");
  else if (result_.seals == 0)
    fail("no seal: nothing is verified");
  else if (options_.anchor) {
    const ExportAnchor& a = *options_.anchor;
    if (sealed_to_ < a.seq) {
      fail("truncated: the sealed export ends at seq " + std::to_string(sealed_to_) + ", the anchor is seq " +
           std::to_string(a.seq));
    } else {
      auto it = seen_.find(a.seq);
      if (it != seen_.end() && it->second != a.hash)
        fail("seq " + std::to_string(a.seq) + " has another hash than the anchor's");
    }
  }
  return result_;
}

}  // namespace zn::broker::audit_export
