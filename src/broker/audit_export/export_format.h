// The shapes a record is exported in (issue 16), chosen per sink:
//  - native: AuditRecord::json_line(), {"zn":"audit","seq":..,...,"hash":..};
//  - ocsf: an OCSF 1.1 event (Network Activity 4001, HTTP Activity 4002, DNS
//    Activity 4003, or Authorize Session 3003 for the control plane's
//    decisions) with the native record whole under "unmapped":{"zn":{..}},
//    so a receiver can still verify the chain and the seals.
// And back: the native record inside either shape, for the verifier.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/audit/event.h"

namespace zn::broker::audit_export {

enum class ExportFormat { kNative, kOcsf };

// "native" / "ocsf"; std::nullopt for anything else.
std::optional<ExportFormat> parse_export_format(std::string_view name);

// One line (no newline) for the record; `host` names this host in OCSF's
// device.hostname.
std::string format_record(const AuditRecord& record, ExportFormat format, const std::string& host);

// The OCSF object (format_record's ocsf line, parsed), for tests and docs.
nlohmann::json ocsf_event(const AuditRecord& record, const std::string& host);

// The native record an exported line carries (either shape); the verifier
// recomputes its hash from these fields. An OCSF line must be exactly the
// event ocsf_event() makes of the record it carries (its device.hostname the
// host), so no field outside unmapped.zn can be changed unnoticed; `host` is
// set to that hostname for the verifier to match against the seal's.
// std::nullopt, with `error` set, if the line is neither shape, a field has
// the wrong type, or an OCSF envelope does not match its record.
std::optional<AuditRecord> parse_exported_record(std::string_view line, std::string* error = nullptr,
                                                 std::optional<std::string>* ocsf_host = nullptr);

}  // namespace zn::broker::audit_export
