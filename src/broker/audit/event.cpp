#include "broker/audit/event.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace zn::broker {

namespace {

// One line per category.
// clang-format off
constexpr std::string_view kEventNames[] = {
    "egress:allow",   "egress:deny",     "egress:ask",     "egress:approved",
    "egress:denied",       // an operator denied a held request ("egress:deny" is the policy's)
    "egress:ask_timeout",  // a held request nobody decided in time
    "egress:ask_cancelled",  // the guest gave up on a held request before a decision
    "egress:rate_limited",
    "egress:error",  // allowed, but no upstream could be connected
    "dns:allow",      "dns:deny",
    "dns:unanswered",  // an allowed name got no address (NXDOMAIN, no data, resolver failure); aggregated
    "packet:deny",
    "resource:read",  "resource:write",  "resource:deny",
    "command:run",    "command:reject", "command:rotate",
    "session:create", "session:update",  "session:delete",
    "secret:reflected",  // an upstream sent an injected secret back; scrubbed
    "secret:canary",     // a planted fake credential left in egress; refused
    "secret:misuse",     // a placeholder headed where its rule does not send it; refused
    "key:rotate",        // the host key sealing resources at rest was replaced
    "grant:created",     // a standing approval (znctl approval allow --for)
    "grant:expired",     "grant:revoked",
    "ingress:expose",    // a guest port declared (znctl session expose)
    "ingress:unexpose",
    "ingress:ticket",    // a one-time ticket minted (never the ticket)
    "ingress:admit",     // a client let in to a declared port (ticket, binding, public)
    "ingress:deny",      // a client refused at a declared port
    "ingress:close",     // an admitted connection ended (bytes, duration)
    "audit:dropped",     // an export sink's spool overflowed: records skipped for it (counts)
    "audit:pruned",      // retention cut the store's oldest records (a signed checkpoint stays)
};
// clang-format on

constexpr std::string_view kEventPrefixes[] = {
    "egress:", "dns:", "packet:", "resource:", "command:", "session:",
    "secret:", "key:", "grant:",  "ingress:",  "audit:",
};

// Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF). Rejects C0/C1
// control characters and DEL when reject_controls.
bool valid_text(std::string_view s, bool reject_controls) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if (c >= 0xC2 && c <= 0xDF) {
      cp = c & 0x1F;
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      cp = c & 0x0F;
      len = 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      cp = c & 0x07;
      len = 4;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    if (reject_controls && (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))) return false;
    i += len;
  }
  return true;
}

int depth_of(const nlohmann::json& j, int limit) {
  if (!j.is_structured()) return 0;
  if (limit <= 0) return 1;  // over the limit already; stop descending
  int d = 0;
  for (const auto& v : j) {
    d = std::max(d, depth_of(v, limit - 1));
    if (d >= limit) break;
  }
  return d + 1;
}

}  // namespace

bool is_audit_event_name(std::string_view name) {
  for (auto n : kEventNames)
    if (n == name) return true;
  return false;
}

bool is_audit_event_prefix(std::string_view prefix) {
  for (auto p : kEventPrefixes)
    if (p == prefix) return true;
  return false;
}

void validate_audit_head(const std::string& event, const std::string& sid) {
  if (!is_audit_event_name(event)) throw std::invalid_argument("audit: unknown event name");
  if (sid.size() > kAuditMaxSidLen) throw std::invalid_argument("audit: sid longer than 128 bytes");
  if (!valid_text(sid, /*reject_controls=*/true))
    throw std::invalid_argument("audit: sid has control characters or invalid UTF-8");
}

void validate_audit_detail(const nlohmann::json& detail, std::string* detail_json) {
  if (!detail.is_object()) throw std::invalid_argument("audit: detail must be a JSON object");
  if (depth_of(detail, kAuditMaxDetailDepth) > kAuditMaxDetailDepth)
    throw std::invalid_argument("audit: detail nested too deeply");
  std::string dumped;
  try {
    dumped = detail.dump();  // strict: throws on invalid UTF-8
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("audit: detail is not valid UTF-8 JSON");
  }
  if (dumped.size() > kAuditMaxDetailBytes) throw std::invalid_argument("audit: detail too large");
  if (detail_json) *detail_json = std::move(dumped);
}

void validate_audit_event(const AuditEvent& ev, std::string* detail_json) {
  validate_audit_head(ev.event, ev.sid);
  validate_audit_detail(ev.detail, detail_json);
}

std::string format_audit_ts(std::chrono::system_clock::time_point tp) {
  using namespace std::chrono;
  const auto ms_tp = floor<milliseconds>(tp);
  const auto s_tp = floor<seconds>(ms_tp);
  const auto ms = (ms_tp - s_tp).count();
  const std::time_t t = system_clock::to_time_t(time_point_cast<system_clock::duration>(s_tp));
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) throw std::runtime_error("audit: time out of range");
  char buf[40];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  if (n != 24) throw std::runtime_error("audit: time out of range");
  return std::string(buf, static_cast<size_t>(n));
}

namespace {

// `,"key":value` pieces of a record's JSON text: a string value escaped as
// dump() escapes it, a number or a serialised object as it is.
// ASCII (every head field but a rare sid) is escaped here, byte for byte
// as dump() would (its two allocations per field showed in the audit
// writer's profile); anything else goes through dump(), which also refuses
// invalid UTF-8.
void put_string(std::string& out, std::string_view key, const std::string& value) {
  out += key;
  for (const char c : value)
    if (static_cast<unsigned char>(c) >= 0x80) {
      out += nlohmann::json(value).dump();
      return;
    }
  out += '"';
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}
void put_raw(std::string& out, std::string_view key, const std::string& value) {
  out += key;
  out += value;
}

}  // namespace

std::string AuditRecord::canonical_payload() const {
  // What dump() writes for {"seq","ts","event","sid","detail"} (keys in
  // std::map order, no whitespace), without copying the detail into a new
  // object to dump it again (tests compare the two byte for byte).
  std::string out;
  out.reserve(96 + detail_json.size());
  put_raw(out, R"({"detail":)", detail_json.empty() ? detail.dump() : detail_json);
  put_string(out, R"(,"event":)", event);
  put_raw(out, R"(,"seq":)", std::to_string(seq));
  put_string(out, R"(,"sid":)", sid);
  put_string(out, R"(,"ts":)", ts);
  out += '}';
  return out;
}

std::string AuditRecord::json_line() const {
  std::string out;
  out.reserve(224 + detail_json.size());
  put_raw(out, R"({"zn":"audit","seq":)", std::to_string(seq));
  put_string(out, R"(,"ts":)", ts);
  put_string(out, R"(,"event":)", event);
  put_string(out, R"(,"sid":)", sid);
  put_raw(out, R"(,"detail":)", detail_json.empty() ? detail.dump() : detail_json);
  put_string(out, R"(,"prev":)", prev);
  put_string(out, R"(,"hash":)", hash);
  out += '}';
  return out;
}

}  // namespace zn::broker
