// znctl approval: requests held for a human's answer (policy "ask"), and
// standing grants (an approval --for a bounded time).
#include <algorithm>
#include <iostream>

#include "broker/control/server.h"
#include "command.h"

namespace zn::znctl {

namespace {
namespace approval_cli {

uint64_t number(const std::string& text, const char* what) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(std::string(what) + " is a number (see approval list, approval grants)");
  return std::stoull(text);
}

// "30s", "10m", "2h": seconds, or 0 when it is none of these.
int64_t seconds_of(const std::string& text) {
  if (text.size() < 2 || text.size() > 12) return 0;
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int64_t n = std::stoll(digits);
  switch (text.back()) {
    case 's':
      return n;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    default:
      return 0;
  }
}

void print_held(const json& h) {
  std::cout << h["ticket"] << "  " << h["session"].get<std::string>() << "  "
            << h["method"].get<std::string>() << " " << h["url"].get<std::string>() << "  held "
            << h.value("held_s", 0) << "s, expires " << h["expires"].get<std::string>() << "\n";
  if (h.contains("header_names") && !h["header_names"].empty()) {
    std::cout << "    headers:";
    for (const auto& n : h["header_names"]) std::cout << " " << n.get<std::string>();
    std::cout << "\n";
  }
  if (h.contains("body_preview") && !h["body_preview"].get<std::string>().empty())
    std::cout << "    body: " << h["body_preview"].get<std::string>() << "\n";
}

void print_grant(const json& g) {
  std::cout << g["id"] << "  " << g["session"].get<std::string>() << "  " << g["method"].get<std::string>()
            << " " << g["scheme"].get<std::string>() << "://" << g["host"].get<std::string>()
            << g["path"].get<std::string>() << (g.value("path_pattern", false) ? " (pattern)" : "")
            << "  created " << g["created"].get<std::string>() << ", expires "
            << g["expires"].get<std::string>() << "  by uid " << g["uid"] << "\n";
}

int list(const Args&) {
  json r = call("approval.list");
  print(r, [&] {
    for (const auto& h : r) print_held(h);
  });
  return 0;
}

// allow TICKET [--once | --for DURATION [--path PATTERN]]
int allow(const Args& a) {
  json args = {{"ticket", number(arg(a, 0, "TICKET"), "TICKET")}};
  Args rest(a.begin() + 1, a.end());
  bool once = false;
  if (auto it = std::find(rest.begin(), rest.end(), "--once"); it != rest.end()) {
    once = true;
    rest.erase(it);
  }
  const auto f = flags(rest, 0, {"for", "path"});
  if (once && (f.count("for") || f.count("path")))
    throw UsageError("--once and --for/--path exclude each other");
  if (f.count("path") && !f.count("for")) throw UsageError("--path widens a grant: it needs --for");
  if (f.count("for")) {
    const int64_t s = seconds_of(f.at("for"));
    if (s <= 0) throw UsageError("--for takes a positive duration such as 30s, 10m or 2h");
    args["for_s"] = s;
  }
  if (f.count("path")) args["path"] = f.at("path");
  json r = call("approval.allow", args);
  print(r, [&] {
    std::cout << "approved " << r["ticket"] << "\n";
    if (r.contains("grant")) {
      std::cout << "granted ";
      print_grant(r["grant"]);
    }
  });
  return 0;
}

int deny(const Args& a) {
  json r = call("approval.deny", {{"ticket", number(arg(a, 0, "TICKET"), "TICKET")}});
  print(r, [&] { std::cout << "denied " << r["ticket"] << "\n"; });
  return 0;
}

int grants(const Args&) {
  json r = call("approval.grants");
  print(r, [&] {
    for (const auto& g : r) print_grant(g);
  });
  return 0;
}

int revoke(const Args& a) {
  json r = call("approval.revoke", {{"grant", number(arg(a, 0, "GRANT"), "GRANT")}});
  print(r, [&] { std::cout << "revoked " << r["revoked"] << "\n"; });
  return 0;
}

// Runs until zerod closes the stream: tickets as they are held (and those
// pending when it starts), decisions, expiries and grants. Heartbeats and
// zerod's reply to the request are not events.
int watch(const Args&) {
  broker::control_stream(options.socket, "approval.watch", json::object(), [](const json& line) {
    if (line.contains("heartbeat") || line.contains("ok")) return true;
    print(line, [&] {
      const std::string event = line.value("event", "");
      if (line.contains("grant")) {
        std::cout << event << " ";
        print_grant(line["grant"]);
      } else {
        std::cout << event << " ";
        print_held(line);
      }
      std::cout << std::flush;
    });
    return true;
  });
  return 0;
}

int webhook_key(const Args&) {
  json r = call("approval.webhook_key");
  print(r, [&] { std::cout << "ed25519 " << r["public_key_hex"].get<std::string>() << "\n"; });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"list", "approval list", list},
    {"allow", "approval allow TICKET [--once | --for 30s|10m|2h [--path PATTERN]]", allow},
    {"deny", "approval deny TICKET", deny},
    {"grants", "approval grants", grants},
    {"revoke", "approval revoke GRANT", revoke},
    {"watch", "approval watch", watch},
    {"webhook-key", "approval webhook-key", webhook_key},
};

}  // namespace approval_cli
}  // namespace

std::span<const Verb> approval_verbs() { return approval_cli::kVerbs; }

}  // namespace zn::znctl
