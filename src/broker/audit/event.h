// The audit trail's data model: what a caller records (AuditEvent), what the
// trail stores and emits (AuditRecord), input validation, the timestamp format
// and the two serialisations (canonical payload for hashing, JSON line for
// stdout/journal). No I/O here.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zn::broker {

// What a component asks the audit trail to record.
struct AuditEvent {
  std::string event;      // one of the names of DESIGN.md, e.g. "egress:deny"
  std::string sid;        // session id; may be empty for daemon-wide events
  nlohmann::json detail;  // must be a JSON object
  // Instead of detail, for the data path's records: the detail is built,
  // checked, redacted and serialised on the audit's writer thread, so an I/O
  // loop that posts one per request or query spends no time on JSON or on
  // scanning for secrets. It must own what it reads (the loop's summary
  // is gone by then); detail is ignored when this is set.
  std::function<nlohmann::json()> detail_later;
};

// One stored record of the chain.
struct AuditRecord {
  uint64_t seq = 0;  // 1, 2, 3, ... without gaps
  std::string ts;    // RFC 3339 UTC with milliseconds: 2026-11-29T12:00:00.123Z
  std::string event;
  std::string sid;
  nlohmann::json detail;  // object (after secret redaction)
  // detail as dump() writes it, when the writer made the record (serialised
  // once, on the caller's thread, for the hash, the store and the line);
  // empty in a record read back. detail may then be left empty too: only an
  // append()'s caller gets it.
  std::string detail_json;
  std::string prev;  // hex SHA-256 of the previous record (64 zeros for seq 1)
  std::string hash;  // hex SHA-256(prev || canonical_payload())

  // {"detail":..,"event":..,"seq":..,"sid":..,"ts":..} with keys sorted and no
  // whitespace (nlohmann::json dump() of a std::map-backed object).
  std::string canonical_payload() const;

  // {"zn":"audit","seq":N,"ts":"..","event":"..","sid":"..","detail":{..},"prev":"..","hash":".."}
  // in exactly this key order, no trailing newline.
  std::string json_line() const;
};

inline constexpr size_t kAuditMaxSidLen = 128;
inline constexpr size_t kAuditMaxDetailBytes = 64 * 1024;  // serialised
inline constexpr int kAuditMaxDetailDepth = 32;

// True for the fixed set of event names of DESIGN.md.
bool is_audit_event_name(std::string_view name);
// True for a category prefix of that set ("egress:", "dns:", ...).
bool is_audit_event_prefix(std::string_view prefix);

// Throws std::invalid_argument (with the reason) if the event may not be
// recorded: unknown name, sid > 128 bytes / control characters / invalid
// UTF-8, detail not an object, detail too large or too deep or not
// serialisable (invalid UTF-8 strings).
// detail_json, if given, receives the detail as dump() writes it.
void validate_audit_event(const AuditEvent& ev, std::string* detail_json = nullptr);
// The two halves of it: the name and the sid; the detail (detail_json as above).
void validate_audit_head(const std::string& event, const std::string& sid);
void validate_audit_detail(const nlohmann::json& detail, std::string* detail_json = nullptr);

// RFC 3339 UTC, millisecond precision (truncated), 'Z' suffix. Fixed width for
// years 0000-9999, so string order is time order.
std::string format_audit_ts(std::chrono::system_clock::time_point tp);

}  // namespace zn::broker
