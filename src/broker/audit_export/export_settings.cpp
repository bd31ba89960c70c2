#include "broker/audit_export/export_settings.h"

#include <algorithm>
#include <stdexcept>

namespace zn::broker::audit_export {

namespace {

using nlohmann::json;

uint64_t positive(const json& sink, const std::string& path, const char* key, uint64_t dflt, uint64_t max) {
  if (!sink.contains(key)) return dflt;
  const json& v = sink[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<uint64_t>() > max)
    throw std::invalid_argument(path + "." + key + ": must be an integer 1.." + std::to_string(max));
  return v.get<uint64_t>();
}

std::vector<std::string> strings(const json& sink, const std::string& path, const char* key) {
  std::vector<std::string> out;
  if (!sink.contains(key)) return out;
  const json& v = sink[key];
  if (!v.is_array() || v.empty())
    throw std::invalid_argument(path + "." + key + ": must be a non-empty array");
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string() || v[i].get<std::string>().empty())
      throw std::invalid_argument(path + "." + key + "[" + std::to_string(i) +
                                  "]: must be a non-empty string");
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

}  // namespace

bool SinkFilter::admits(const AuditRecord& r) const {
  if (!sessions.empty() && std::find(sessions.begin(), sessions.end(), r.sid) == sessions.end()) return false;
  if (events.empty()) return true;
  for (const std::string& e : events) {
    if (e.back() == ':' ? r.event.compare(0, e.size(), e) == 0 : r.event == e) return true;
  }
  return false;
}

const std::vector<std::string>& export_settings_fields() {
  static const std::vector<std::string> kFields = {"name",          "type",
                                                   "format",        "events",
                                                   "sessions",      "spool_max_records",
                                                   "batch_max",     "linger_ms",
                                                   "idle_seal_ms",  "backoff_initial_ms",
                                                   "backoff_max_ms"};
  return kFields;
}

json type_fields(const json& sink) {
  json out = sink;
  for (const std::string& f : export_settings_fields()) out.erase(f);
  out["type"] = sink.value("type", "");
  return out;
}

ExportSettings parse_export_settings(const json& sink, const std::string& path) {
  if (!sink.is_object()) throw std::invalid_argument(path + ": must be an object");
  ExportSettings s;
  if (!sink.contains("name") || !sink["name"].is_string() || !valid_name(sink["name"].get<std::string>()))
    throw std::invalid_argument(path + ".name: required, 1..64 of a-z 0-9 _ -");
  s.name = sink["name"].get<std::string>();
  if (!sink.contains("type") || !sink["type"].is_string())
    throw std::invalid_argument(path + ".type: required: file, syslog, http or nats");
  s.type = sink["type"].get<std::string>();
  if (sink.contains("format")) {
    const auto f =
        sink["format"].is_string() ? parse_export_format(sink["format"].get<std::string>()) : std::nullopt;
    if (!f) throw std::invalid_argument(path + ".format: must be \"native\" or \"ocsf\"");
    s.format = *f;
  }
  s.filter.events = strings(sink, path, "events");
  for (size_t i = 0; i < s.filter.events.size(); ++i) {
    const std::string& e = s.filter.events[i];
    if (e.back() == ':' ? !is_audit_event_prefix(e) : !is_audit_event_name(e))
      throw std::invalid_argument(path + ".events[" + std::to_string(i) + "]: unknown event or category " +
                                  e);
  }
  s.filter.sessions = strings(sink, path, "sessions");
  s.spool_max_records = positive(sink, path, "spool_max_records", s.spool_max_records, 1'000'000'000);
  s.batch_max = positive(sink, path, "batch_max", s.batch_max, 10000);
  s.linger = std::chrono::milliseconds(positive(sink, path, "linger_ms", 200, 60'000));
  s.idle_seal = std::chrono::milliseconds(positive(sink, path, "idle_seal_ms", 30000, 86'400'000));
  s.backoff_initial = std::chrono::milliseconds(positive(sink, path, "backoff_initial_ms", 500, 3'600'000));
  s.backoff_max = std::chrono::milliseconds(positive(sink, path, "backoff_max_ms", 60000, 3'600'000));
  if (s.backoff_max < s.backoff_initial)
    throw std::invalid_argument(path + ".backoff_max_ms: must be at least backoff_initial_ms");
  return s;
}

}  // namespace zn::broker::audit_export
