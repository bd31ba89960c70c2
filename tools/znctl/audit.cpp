// znctl audit: reads zerod's audit database directly (read-only), so the
// trail can be queried and verified while zerod is down.
#include <chrono>
#include <ctime>
#include <iostream>
#include <thread>

#include "broker/audit/log.h"
#include "broker/audit/store.h"
#include "broker/audit_export/export_file_reader.h"
#include "broker/audit_export/export_verifier.h"
#include "broker/audit_sinks/nats_reader.h"
#include "command.h"

namespace zn::znctl {

namespace {
namespace audit_cli {

std::string audit_db() { return options.state_dir + "/audit.db"; }

// --since/--until: RFC 3339 UTC, or relative to now as "-10m", "-2h", "-30s", "-1d".
std::chrono::system_clock::time_point parse_time(const std::string& text) {
  if (!text.empty() && text[0] == '-') {
    const std::string digits = text.size() > 2 ? text.substr(1, text.size() - 2) : std::string();
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("relative time is -N[s|m|h|d]: " + text);
    const long n = std::stol(digits);
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
//
// Without FILE: the store's chain (read-only; zerod may run). With
// --anchor SEQ:HASH (a head taken earlier, e.g. from `audit head` or a
// receiver), the store must still hold record SEQ with that hash: a cut
// tail shows, which the chain alone cannot show.
//
// With FILE...: an exported stream (a file sink's files in order, rotated
// .gz ones first), checked against the audit public key (--key HEX, else
// zerod's, asked over the control socket).
broker::Ed25519PublicKey audit_public_key(const std::map<std::string, std::string>& f) {
  std::string hex = f.count("key") ? f.at("key") : std::string();
  if (hex.empty()) hex = call("audit.key").value("public_key", "");
  const auto key = broker::audit_export::parse_public_key_hex(hex);
  if (!key) throw UsageError("--key is the audit public key, 64 lowercase hex (znctl audit key)");
  return *key;
}

int verify_store(const std::map<std::string, std::string>& f) {
  auto v = broker::AuditLog::verify_file(audit_db());
  if (v.ok && v.checkpoint_seq) {
    // Retention cut the store: the chain verifies from the checkpoint,
    // which only counts if the audit key signed it.
    broker::AuditStore store(audit_db(), broker::AuditStore::Mode::kReadOnly);
    const auto cp = store.checkpoint();
    if (!cp || !broker::audit_export::audit_checkpoint_signed_by(*cp, audit_public_key(f))) {
      v.ok = false;
      v.reason =
          "the checkpoint at seq " + std::to_string(*v.checkpoint_seq) + " is not signed by the audit key";
    }
  }
  json r = {{"ok", v.ok}, {"records", v.records}, {"reason", v.reason}};
  if (v.first_bad_seq) r["first_bad_seq"] = *v.first_bad_seq;
  if (v.checkpoint_seq) r["checkpoint_seq"] = *v.checkpoint_seq;
  if (v.ok && f.count("anchor")) {
    const auto anchor = broker::audit_export::parse_export_anchor(f.at("anchor"));
    if (!anchor) throw UsageError("--anchor is SEQ:HASH (64 lowercase hex)");
    broker::AuditStore store(audit_db(), broker::AuditStore::Mode::kReadOnly);
    broker::AuditQuery q;
    q.after_seq = anchor->seq - 1;
    q.limit = 1;
    const auto recs = store.query(q);
    if (recs.empty() || recs.front().seq != anchor->seq) {
      v.ok = false;
      v.reason = "truncated: the store ends at seq " + std::to_string(store.head().seq) +
                 ", the anchor is seq " + std::to_string(anchor->seq);
    } else if (recs.front().hash != anchor->hash) {
      v.ok = false;
      v.reason = "seq " + std::to_string(anchor->seq) + " has another hash than the anchor's";
    }
    r["ok"] = v.ok;
    r["reason"] = v.reason;
  }
  print(r, [&] {
    if (v.ok && v.checkpoint_seq)
      std::cout << "audit chain ok: " << v.records << " records after the signed checkpoint at seq "
                << *v.checkpoint_seq << "\n";
    else if (v.ok)
      std::cout << "audit chain ok: " << v.records << " records\n";
    else if (v.first_bad_seq)
      std::cout << "audit chain BROKEN at seq " << *v.first_bad_seq << ": " << v.reason << "\n";
    else
      std::cout << "audit chain BROKEN: " << v.reason << "\n";
  });
  return v.ok ? 0 : 3;
}

int verify_export(const std::vector<std::string>& files, const std::map<std::string, std::string>& f,
                  bool strict) {
  broker::audit_export::ExportVerifier::Options o;
  o.public_key = audit_public_key(f);
  o.strict = strict;
  if (f.count("host")) o.host = f.at("host");
  if (f.count("anchor")) {
    o.anchor = broker::audit_export::parse_export_anchor(f.at("anchor"));
    if (!o.anchor) throw UsageError("--anchor is SEQ:HASH (64 lowercase hex)");
  }
  broker::audit_export::ExportVerifier verifier(o);
  if (f.count("nats")) {
    // A range pulled from JetStream: every message the stream holds for the host, in stream order.
    broker::audit_sinks::NatsReadOptions n;
    n.url = f.at("nats");
    if (!f.count("host")) throw UsageError("--nats needs --host (the host whose audit to read)");
    n.host = f.at("host");
    if (f.count("stream")) n.stream = f.at("stream");
    if (f.count("subject-prefix")) n.subject_prefix = f.at("subject-prefix");
    if (f.count("ca-file")) n.ca_file = f.at("ca-file");
    for (const std::string& line : broker::audit_sinks::read_nats_audit(n)) verifier.feed(line);
  }
  for (const std::string& file : files)
    broker::audit_export::read_export_lines(file, [&](std::string_view line) { return verifier.feed(line); });
  const auto v = verifier.finish();
  json dropped = json::array();
  for (const auto& d : v.dropped)
    dropped.push_back({{"first", d.first}, {"last", d.last}, {"count", d.count()}});
  json r = {{"ok", v.ok},
            {"records", v.records},
            {"seals", v.seals},
            {"first_seq", v.first_seq},
            {"last_seq", v.last_seq},
            {"last_hash", v.last_hash},
            {"redelivered", v.redelivered},
            {"torn", v.torn},
            {"dropped", dropped},
            {"reason", v.reason}};
  if (!v.ok && v.line) r["line"] = v.line;
  print(r, [&] {
    if (v.ok) {
      std::cout << "export ok: " << v.records << " records under " << v.seals << " seals, seq " << v.first_seq
                << ".." << v.last_seq << "\n";
      for (const auto& d : v.dropped)
        std::cout << "  zerod dropped seq " << d.first << ".." << d.last << " (" << d.count()
                  << " records) for this sink: its spool overflowed\n";
    } else {
      std::cout << "export BROKEN" << (v.line ? " at line " + std::to_string(v.line) : std::string()) << ": "
                << v.reason << "\n";
    }
  });
  return v.ok ? 0 : 3;
}

int verify(const Args& a) {
  std::vector<std::string> files;
  Args rest;
  bool strict = false;
  size_t i = 0;
  for (; i < a.size() && a[i].rfind("--", 0) != 0; ++i) files.push_back(a[i]);
  for (; i < a.size(); ++i) {
    if (a[i] == "--strict")
      strict = true;
    else
      rest.push_back(a[i]);
  }
  auto f = flags(rest, 0, {"anchor", "key", "host", "nats", "stream", "subject-prefix", "ca-file"});
  if (f.count("nats") && !files.empty()) throw UsageError("FILE... or --nats, not both");
  if (files.empty() && !f.count("nats")) {
    if (f.count("stream") || f.count("subject-prefix") || f.count("ca-file"))
      throw UsageError("--stream, --subject-prefix and --ca-file apply to --nats");
    if (f.count("host") || strict) throw UsageError("--host and --strict apply to FILEs");
    return verify_store(f);
  }
  return verify_export(files, f, strict);
}

// The chain head now, as an anchor for a later verify.
int head(const Args& a) {
  flags(a, 0, {});
  broker::AuditStore store(audit_db(), broker::AuditStore::Mode::kReadOnly);
  const auto h = store.head();
  print({{"seq", h.seq}, {"hash", h.hash}, {"anchor", std::to_string(h.seq) + ":" + h.hash}},
        [&] { std::cout << h.seq << ":" << h.hash << "\n"; });
  return 0;
}

int key(const Args& a) {
  flags(a, 0, {});
  const json k = call("audit.key");
  print(k, [&] { std::cout << k.value("public_key", "") << "  kid " << k.value("kid", "") << "\n"; });
  return 0;
}

int sinks(const Args& a) {
  flags(a, 0, {});
  const json s = call("audit.sinks");
  print(s, [&] {
    for (const json& e : s)
      std::cout << e.value("name", "") << "  " << (e.value("up", false) ? "up" : "down") << "  delivered "
                << e.value("delivered_records", 0) << "  backlog " << e.value("backlog", 0) << "  dropped "
                << e.value("dropped_records", 0) << "  failures " << e.value("failures", 0)
                << (e.value("last_error", "").empty() ? "" : "  last error: " + e.value("last_error", ""))
                << "\n";
  });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"query", "audit query [--sid ID] [--event NAME|CATEGORY:] [--since T] [--until T] [--limit N]", query},
    {"tail", "audit tail [--sid ID] [--event NAME]", tail},
    {"verify",
     "audit verify [FILE... | --nats URL --host NAME [--stream S] [--subject-prefix P] [--ca-file F]] "
     "[--anchor "
     "SEQ:HASH] [--key HEX] [--host NAME] [--strict]",
     verify},
    {"head", "audit head", head},
    {"key", "audit key", key},
    {"sinks", "audit sinks", sinks},
};

}  // namespace audit_cli
}  // namespace

std::span<const Verb> audit_verbs() { return audit_cli::kVerbs; }

}  // namespace zn::znctl
