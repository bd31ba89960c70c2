// znctl audit: reads zerod's audit database directly (read-only), so the
// trail can be queried and verified while zerod is down.
#include <chrono>
#include <ctime>
#include <iostream>
#include <thread>

#include "broker/audit/log.h"
#include "broker/audit/store.h"
#include "command.h"

namespace zn::znctl {

namespace {

std::string audit_db() { return options.state_dir + "/audit.db"; }

// --since/--until: RFC 3339 UTC, or relative to now as "-10m", "-2h", "-30s", "-1d".
std::chrono::system_clock::time_point parse_time(const std::string& text) {
  if (!text.empty() && text[0] == '-') {
    const long n = std::stol(text.substr(1, text.size() - 2));
    const char unit = text.back();
    const long secs = unit == 's'   ? n
                      : unit == 'm' ? n * 60
                      : unit == 'h' ? n * 3600
                      : unit == 'd' ? n * 86400
                                    : -1;
    if (secs < 0) throw UsageError("relative time is -N[s|m|h|d]: " + text);
    return std::chrono::system_clock::now() - std::chrono::seconds(secs);
  }
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) throw UsageError("time is RFC 3339 UTC (2026-11-29T12:00:00Z) or -N[s|m|h|d]: " + text);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

void print_record_line(const broker::AuditRecord& rec) {
  std::cout << rec.ts << "  " << rec.event << "  " << rec.sid << "  " << rec.detail.dump();
}

int query(const Args& a) {
  auto f = flags(a, 0, {"sid", "event", "since", "until", "limit"});
  broker::AuditQuery q;
  if (f.count("sid")) q.sid = f["sid"];
  if (f.count("event")) q.event = f["event"];
  if (f.count("since")) q.since = parse_time(f["since"]);
  if (f.count("until")) q.until = parse_time(f["until"]);
  if (f.count("limit")) q.limit = std::stoul(f["limit"]);
  broker::AuditStore store(audit_db(), broker::AuditStore::Mode::kReadOnly);
  auto records = store.query(q);
  json r = json::array();
  for (const auto& rec : records) r.push_back(json::parse(rec.json_line()));
  print(r, [&] {
    for (const auto& rec : records) {
      print_record_line(rec);
      std::cout << "\n";
    }
  });
  return 0;
}

// Polls the last day of the trail and prints records it has not printed yet;
// runs until interrupted.
int tail(const Args& a) {
  auto f = flags(a, 0, {"sid", "event"});
  broker::AuditStore store(audit_db(), broker::AuditStore::Mode::kReadOnly);
  uint64_t last = 0;
  while (true) {
    broker::AuditQuery q;
    if (f.count("sid")) q.sid = f["sid"];
    if (f.count("event")) q.event = f["event"];
    q.since = std::chrono::system_clock::now() - std::chrono::hours(24);
    q.limit = broker::AuditQuery::kMaxLimit;
    for (const auto& rec : store.query(q)) {
      if (rec.seq <= last) continue;
      last = rec.seq;
      // Flushed per record: a pipe reader sees each as it arrives.
      print(json::parse(rec.json_line()), [&] {
        print_record_line(rec);
        std::cout << std::endl;
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return 0;
}

// Exit 3 for a broken chain: the check ran and found tampering, which a
// script must tell apart from failing to run (1).
int verify(const Args&) {
  auto v = broker::AuditLog::verify_file(audit_db());
  json r = {{"ok", v.ok}, {"records", v.records}, {"reason", v.reason}};
  if (v.first_bad_seq) r["first_bad_seq"] = *v.first_bad_seq;
  print(r, [&] {
    if (v.ok)
      std::cout << "audit chain ok: " << v.records << " records\n";
    else
      std::cout << "audit chain BROKEN at seq " << v.first_bad_seq.value_or(0) << ": " << v.reason << "\n";
  });
  return v.ok ? 0 : 3;
}

constexpr Verb kVerbs[] = {
    {"query", "audit query [--sid ID] [--event NAME|CATEGORY:] [--since T] [--until T] [--limit N]", query},
    {"tail", "audit tail [--sid ID] [--event NAME]", tail},
    {"verify", "audit verify", verify},
};

}  // namespace

std::span<const Verb> audit_verbs() { return kVerbs; }

}  // namespace zn::znctl
