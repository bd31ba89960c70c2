// Export batches for the sink tests: records of a real chain's shape, their
// native lines, and a seal line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit/event.h"
#include "broker/audit_export/sink.h"

namespace zn::broker::test {

// `count` records from seq `first`, events cycling through a few categories,
// 2026-11-29T12:00:00.123Z plus one second per seq; `detail_bytes` pads each
// detail (for large batches).
inline audit_export::ExportBatch make_batch(uint64_t first, size_t count, size_t detail_bytes = 0) {
  static const char* kEvents[] = {"egress:allow", "dns:answer", "secret:use", "egress:deny"};
  audit_export::ExportBatch batch;
  for (size_t i = 0; i < count; ++i) {
    AuditRecord r;
    r.seq = first + i;
    char ts[32];
    std::snprintf(ts, sizeof(ts), "2026-11-29T12:%02d:%02d.123Z", static_cast<int>((r.seq / 60) % 60),
                  static_cast<int>(r.seq % 60));
    r.ts = ts;
    r.event = kEvents[r.seq % 4];
    r.sid = "user-1";
    r.detail = {{"host", "api.example.com"}, {"note", "naïve café ✓ \"quoted\" \\ tab\t"}};
    if (detail_bytes) r.detail["pad"] = std::string(detail_bytes, 'x');
    r.prev = std::string(64, '0');
    r.hash = std::string(64, 'a');
    batch.lines.push_back(r.json_line());
    batch.records.push_back(std::move(r));
  }
  batch.first_seq = first;
  batch.last_seq = first + count - 1;
  batch.seal_line = nlohmann::ordered_json{
      {"zn", "audit-seal"},
      {"first_seq", batch.first_seq},
      {"last_seq", batch.last_seq},
      {"ts", "2026-11-29T13:00:00.456Z"},
      {"sig",
       "c2lnbmF0dXJl"}}.dump();
  return batch;
}

}  // namespace zn::broker::test
