// libFuzzer target: the verifier a receiver runs on an exported audit stream
// (issue 16: `znctl audit verify FILE`/`--nats`), which reads whatever the
// file or the bus holds.
//
// Build and run: as http1_fuzz (see there), target export_verifier_fuzz.
//
// Two halves, chosen by the first byte: arbitrary lines straight into the
// verifier (no crash, no unbounded work); and an honest stream (records and
// seals made here under a fixed key, native or OCSF) with one byte changed
// where the input says: it must verify before the change and never after it.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "broker/audit/chain.h"
#include "broker/audit_export/batch_seal.h"
#include "broker/audit_export/export_format.h"
#include "broker/audit_export/export_verifier.h"

namespace {

using namespace zn::broker;
using namespace zn::broker::audit_export;

void check(bool ok) {
  if (!ok) std::abort();
}

const std::shared_ptr<const SigningKey>& key() {
  static const std::shared_ptr<const SigningKey> k = [] {
    std::array<unsigned char, 32> seed{};
    for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<unsigned char>(i * 7 + 1);
    return SigningKey::from_seed(seed);
  }();
  return k;
}

// Ten records in three sealed batches, the middle one with a filtered-out record.
std::vector<std::string> honest_stream(ExportFormat format) {
  BatchSealer sealer(key(), "host-a");
  std::vector<AuditRecord> chain;
  std::string prev = audit_genesis_hash();
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    AuditRecord r;
    r.seq = seq;
    r.ts = "2026-12-01T12:00:00.1" + std::to_string(seq % 10) + "0Z";
    r.event = seq % 2 ? "egress:allow" : "dns:deny";
    r.sid = "s1";
    r.detail =
        seq % 2 ? nlohmann::json{{"host", "api.example"}, {"method", "GET"}, {"path", "/x"}, {"status", 200}}
                : nlohmann::json{{"name", "n.example"}, {"reason", "default deny"}};
    r.prev = prev;
    r.hash = audit_chain_hash(prev, r);
    prev = r.hash;
    chain.push_back(r);
  }
  std::vector<std::string> lines;
  auto batch = [&](uint64_t first, uint64_t last, uint64_t skip) {
    std::vector<AuditRecord> recs;
    for (uint64_t s = first; s <= last; ++s) {
      if (s == skip) continue;
      recs.push_back(chain[s - 1]);
      lines.push_back(format_record(chain[s - 1], format, "host-a"));
    }
    lines.push_back(sealer.seal(first, last, chain[last - 1].hash, recs, std::nullopt));
  };
  batch(1, 3, 0);
  batch(4, 7, 5);
  batch(8, 10, 0);
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    ExportVerifier::Options o;
    o.public_key = key()->public_key();
    ExportVerifier v(o);
    std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      v.feed(rest.substr(0, nl));
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
    (void)v.finish();
    return 0;
  }
  if (size < 7) return 0;
  // Made once per shape: signing is the slow part.
  static const std::vector<std::string> kNative = honest_stream(ExportFormat::kNative);
  static const std::vector<std::string> kOcsf = honest_stream(ExportFormat::kOcsf);
  const std::vector<std::string>& lines = data[1] % 2 ? kOcsf : kNative;
  std::string joined;
  for (const std::string& l : lines) joined += l + "\n";
  // The anchor's hash: the head's.
  static const auto verify_honest = [](const std::vector<std::string>& lines) {
    ExportVerifier::Options o;
    o.public_key = key()->public_key();
    ExportVerifier v(o);
    for (const std::string& l : lines) v.feed(l);
    return v.finish();
  };
  static const ExportVerifyResult kNativeBefore = verify_honest(kNative);
  static const ExportVerifyResult kOcsfBefore = verify_honest(kOcsf);
  const ExportVerifyResult& before = data[1] % 2 ? kOcsfBefore : kNativeBefore;
  check(before.ok);
  const size_t at = (static_cast<size_t>(data[2]) << 24 | static_cast<size_t>(data[3]) << 16 |
                     static_cast<size_t>(data[4]) << 8 | data[5]) %
                    joined.size();
  const char now = static_cast<char>(data[6]);
  if (joined[at] == now) return 0;
  joined[at] = now;
  std::vector<std::string> changed;
  std::string_view rest(joined);
  while (!rest.empty()) {
    const size_t nl = rest.find('\n');
    changed.emplace_back(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  ExportVerifier::Options o;
  o.public_key = key()->public_key();
  o.anchor = ExportAnchor{10, before.last_hash};
  ExportVerifier v(o);
  for (const std::string& l : changed) v.feed(l);
  check(!v.finish().ok);
  return 0;
}
