#include "broker/audit_export/export_format.h"

#include <chrono>
#include <ctime>

namespace zn::broker::audit_export {

namespace {

using nlohmann::json;

// OCSF 1.1 class and category ids.
constexpr int kCategoryIam = 3, kCategoryNetwork = 4;
constexpr int kClassAuthorizeSession = 3003, kClassNetworkActivity = 4001, kClassHttpActivity = 4002,
              kClassDnsActivity = 4003;

// Milliseconds since the epoch of an audit ts (2026-11-29T12:00:00.123Z).
int64_t epoch_ms(const std::string& ts) {
  std::tm tm{};
  int ms = 0;
  if (ts.size() != 24 || std::sscanf(ts.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                                     &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

std::string str_or(const json& detail, const char* key) {
  auto it = detail.find(key);
  return it != detail.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// OCSF HTTP Activity activity ids by method.
int http_activity(const std::string& method) {
  static const std::pair<const char*, int> kIds[] = {{"CONNECT", 1}, {"DELETE", 2},  {"GET", 3},
                                                     {"HEAD", 4},    {"OPTIONS", 5}, {"POST", 6},
                                                     {"PUT", 7},     {"TRACE", 8},   {"PATCH", 9}};
  for (const auto& [m, id] : kIds)
    if (method == m) return id;
  return 99;
}

bool is_refusal(const std::string& event) {
  static const char* kRefusals[] = {"egress:deny",          "egress:denied",       "egress:ask_timeout",
                                    "egress:ask_cancelled", "egress:rate_limited", "dns:deny",
                                    "packet:deny",          "resource:deny",       "command:reject",
                                    "ingress:deny",         "secret:canary",       "secret:misuse"};
  for (const char* e : kRefusals)
    if (event == e) return true;
  return false;
}

int severity(const std::string& event) {
  if (event.rfind("secret:", 0) == 0) return 4;  // High: a credential left or came back
  if (event == "audit:dropped") return 3;        // Medium: the export lost records
  return is_refusal(event) ? 2 : 1;              // Low for refusals, else Informational
}

}  // namespace

std::optional<ExportFormat> parse_export_format(std::string_view name) {
  if (name == "native") return ExportFormat::kNative;
  if (name == "ocsf") return ExportFormat::kOcsf;
  return std::nullopt;
}

json ocsf_event(const AuditRecord& r, const std::string& host) {
  const json& d = r.detail.is_object() ? r.detail : json::object();
  const std::string category = r.event.substr(0, r.event.find(':'));
  const std::string method = str_or(d, "method");
  int class_uid = kClassAuthorizeSession, category_uid = kCategoryIam, activity_id = 99;
  if (category == "egress" && !method.empty()) {
    class_uid = kClassHttpActivity;
    category_uid = kCategoryNetwork;
    activity_id = http_activity(method);
  } else if (category == "egress" || category == "packet" || category == "ingress") {
    class_uid = kClassNetworkActivity;
    category_uid = kCategoryNetwork;
    // 1 Open, 2 Close, 5 Refuse, 6 Traffic.
    activity_id = is_refusal(r.event)          ? 5
                  : r.event == "ingress:close" ? 2
                  : r.event == "egress:allow"  ? 6
                                               : 1;
  } else if (category == "dns") {
    class_uid = kClassDnsActivity;
    category_uid = kCategoryNetwork;
    activity_id = 1;  // Query
  }
  const bool refused = is_refusal(r.event);
  json ev = {
      {"class_uid", class_uid},
      {"category_uid", category_uid},
      {"activity_id", activity_id},
      {"type_uid", class_uid * 100 + activity_id},
      {"time", epoch_ms(r.ts)},
      {"severity_id", severity(r.event)},
      {"status_id", refused ? 2 : 1},       // Failure / Success
      {"action_id", refused ? 2 : 1},       // Denied / Allowed
      {"disposition_id", refused ? 2 : 1},  // Blocked / Allowed
      {"message", r.event},
      {"metadata",
       {{"version", "1.1.0"},
        {"product", {{"name", "zeroness"}, {"vendor_name", "zeroness"}, {"feature", {{"name", "zerod"}}}}},
        {"uid", r.hash},
        {"sequence", r.seq},
        {"log_name", "audit"}}},
      {"device", {{"hostname", host}}},
  };
  if (!r.sid.empty()) ev["actor"] = {{"session", {{"uid", r.sid}}}};
  if (class_uid == kClassHttpActivity) {
    ev["http_request"] = {{"http_method", method},
                          {"url", {{"hostname", str_or(d, "host")}, {"path", str_or(d, "path")}}}};
    if (d.contains("status") && d["status"].is_number_integer())
      ev["http_response"] = {{"code", d["status"]}};
  }
  if (class_uid == kClassDnsActivity) ev["query"] = {{"hostname", str_or(d, "name")}};
  if (class_uid == kClassNetworkActivity || class_uid == kClassHttpActivity) {
    const std::string dst = str_or(d, "host").empty() ? str_or(d, "dst") : str_or(d, "host");
    if (!dst.empty()) ev["dst_endpoint"] = {{"hostname", dst}};
    if (!str_or(d, "client").empty()) ev["src_endpoint"] = {{"ip", str_or(d, "client")}};
  }
  ev["unmapped"] = {{"zn", json::parse(r.json_line())}};
  return ev;
}

std::string format_record(const AuditRecord& record, ExportFormat format, const std::string& host) {
  if (format == ExportFormat::kNative) return record.json_line();
  return ocsf_event(record, host).dump();
}

std::optional<AuditRecord> parse_exported_record(std::string_view line, std::string* error,
                                                 std::optional<std::string>* ocsf_host) {
  auto fail = [&](const char* why) -> std::optional<AuditRecord> {
    if (error) *error = why;
    return std::nullopt;
  };
  const json whole = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!whole.is_object()) return fail("not an audit record or seal");
  const bool ocsf = whole.contains("unmapped");
  const json* native = &whole;
  if (ocsf) {
    const json& u = whole["unmapped"];
    if (!u.is_object() || !u.contains("zn")) return fail("an OCSF line without unmapped.zn");
    native = &u["zn"];
  }
  const json& j = *native;
  if (!j.is_object() || j.value("zn", json()) != "audit") return fail("not an audit record or seal");
  auto is_str = [&](const char* k) { return j.contains(k) && j[k].is_string(); };
  if (!j.contains("seq") || !j["seq"].is_number_unsigned() || !is_str("ts") || !is_str("event") ||
      !is_str("sid") || !is_str("prev") || !is_str("hash") || !j.contains("detail"))
    return fail("a record with a missing or mistyped field");
  AuditRecord r;
  r.seq = j["seq"].get<uint64_t>();
  r.ts = j["ts"].get<std::string>();
  r.event = j["event"].get<std::string>();
  r.sid = j["sid"].get<std::string>();
  r.detail = j["detail"];
  r.prev = j["prev"].get<std::string>();
  r.hash = j["hash"].get<std::string>();
  if (ocsf) {
    const json* device = whole.contains("device") ? &whole["device"] : nullptr;
    if (!device || !device->is_object() || !device->contains("hostname") ||
        !(*device)["hostname"].is_string())
      return fail("an OCSF line without device.hostname");
    const std::string host = (*device)["hostname"].get<std::string>();
    // The native record is verified by its hash; everything around it must
    // be what zerod derives from it, or an edit there would go unseen.
    if (ocsf_event(r, host) != whole)
      return fail("an OCSF line whose fields do not match the record it carries");
    if (ocsf_host) *ocsf_host = host;
  } else if (ocsf_host) {
    ocsf_host->reset();
  }
  return r;
}

}  // namespace zn::broker::audit_export
