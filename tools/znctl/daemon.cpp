// znctl status, stats and events: what zerod reports about itself and its
// sessions. One verb each, so each may be typed without it ("znctl stats").
#include <cstdio>
#include <iostream>

#include "broker/control/server.h"
#include "command.h"

namespace zn::znctl {

namespace {
namespace daemon_cli {

int status_show(const Args&) {
  json r = call("status");
  print(r, [&] { std::cout << r.dump(2) << "\n"; });
  return 0;
}

int stats_show(const Args& a) {
  json args = json::object();
  if (!a.empty()) args["id"] = a[0];
  json r = call("stats", args);
  print(r, [&] {
    for (const auto& [id, counters] : r.items()) {
      std::cout << id << "\n";
      for (const auto& [name, n] : counters.items())
        std::printf("  %-24s %llu\n", name.c_str(), static_cast<unsigned long long>(n.get<uint64_t>()));
    }
  });
  return 0;
}

// Runs until zerod closes the stream. Heartbeats and zerod's reply to the
// request ({"ok":...}) are not events.
int events_watch(const Args&) {
  broker::control_stream(options.socket, "events", json::object(), [](const json& line) {
    if (line.contains("heartbeat") || line.contains("ok")) return true;
    print(line,
          [&] { std::cout << line.value("session", "?") << "  " << line.value("event", "") << std::endl; });
    return true;
  });
  return 0;
}

constexpr Verb kStatusVerbs[] = {{"show", "status show", status_show}};
constexpr Verb kStatsVerbs[] = {{"show", "stats show [ID]", stats_show}};
constexpr Verb kEventsVerbs[] = {{"watch", "events watch", events_watch}};

}  // namespace daemon_cli
}  // namespace

std::span<const Verb> status_verbs() { return daemon_cli::kStatusVerbs; }
std::span<const Verb> stats_verbs() { return daemon_cli::kStatsVerbs; }
std::span<const Verb> events_verbs() { return daemon_cli::kEventsVerbs; }

}  // namespace zn::znctl
