// The settings every sink shares in zerod's config (issue 16), parsed from
// one object of "audit_sinks": its name, the shape its records take, which
// records it takes, how far behind it may fall before records are dropped
// for it, and how it batches. The fields of its type (file, syslog, http,
// nats) are the rest of the object: settings_fields() names the shared ones
// so the type's parser can reject anything neither knows.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/audit/event.h"
#include "broker/audit_export/export_format.h"

namespace zn::broker::audit_export {

// Which records a sink takes: events by exact name or category prefix
// ("egress:"), sessions by id; an empty list takes all.
struct SinkFilter {
  std::vector<std::string> events;
  std::vector<std::string> sessions;
  bool admits(const AuditRecord& record) const;
};

struct ExportSettings {
  std::string name;  // [a-z0-9_-]{1,64}: the cursor file and the metrics label
  std::string type;  // "file", "syslog", "http", "nats"
  ExportFormat format = ExportFormat::kNative;
  SinkFilter filter;
  // Records behind the chain head at most; past it the oldest are dropped for
  // this sink (audited as audit:dropped, declared in the next seal).
  uint64_t spool_max_records = 1'000'000;
  size_t batch_max = 500;  // records read per batch
  // A batch that is not full waits this long after its first record for
  // more before it is sealed: one signature per burst, not per record.
  std::chrono::milliseconds linger{200};
  // A sink whose filter lets nothing through still gets a seal (no records)
  // this long after the range it would cover began, so its receivers can
  // check they are current (--anchor).
  std::chrono::milliseconds idle_seal{30000};
  std::chrono::milliseconds backoff_initial{500};
  std::chrono::milliseconds backoff_max{60000};
};

// Parses the shared fields of audit_sinks[i] (`path` is "$.audit_sinks[i]"
// for errors). Throws std::invalid_argument naming the field.
ExportSettings parse_export_settings(const nlohmann::json& sink, const std::string& path);

// The names of the shared fields (name, type, format, events, sessions,
// spool_max_records, batch_max, linger_ms, idle_seal_ms, backoff_initial_ms, backoff_max_ms).
const std::vector<std::string>& export_settings_fields();

// The sink's object without the shared fields: what its type's parser sees.
nlohmann::json type_fields(const nlohmann::json& sink);

}  // namespace zn::broker::audit_export
