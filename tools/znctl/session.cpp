// znctl session: the sessions zerod runs, created and changed through it.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "command.h"

namespace zn::znctl {

namespace {
namespace session_cli {

void print_session_line(const json& s) {
  std::printf("%-16s idx %-4d %-10s %-18s %-22s policy v%llu%s\n", s["id"].get<std::string>().c_str(),
              s["session_idx"].get<int>(), s["device"].get<std::string>().c_str(),
              s["network"]["address"].get<std::string>().c_str(),
              s["network"]["address6"].get<std::string>().c_str(),
              static_cast<unsigned long long>(s["policy_version"].get<uint64_t>()),
              s["adopted"].get<bool>() ? " (adopted)" : "");
}

int list(const Args&) {
  json r = call("session.list");
  print(r, [&] {
    for (const auto& s : r) print_session_line(s);
  });
  return 0;
}

// Devices zerod keeps denying for no session (an adopted device whose
// session was deleted): adopt one again, or remove it, to end that.
int parked(const Args&) {
  json r = call("session.parked");
  print(r, [&] {
    for (const auto& d : r)
      std::printf("%-16s ifindex %-6d parked (all traffic dropped)\n", d["device"].get<std::string>().c_str(),
                  d["ifindex"].get<int>());
  });
  return 0;
}

int show(const Args& a) {
  json r = call("session.show", {{"id", arg(a, 0, "ID")}});
  print(r, [&] { std::cout << r.dump(2) << "\n"; });
  return 0;
}

int create(const Args& a) {
  auto f = flags(a, 1, {"policy", "device", "slot"});
  if (!f.count("policy")) throw UsageError("missing --policy FILE");
  json args = {{"id", arg(a, 0, "ID")}, {"policy", read_file(f["policy"])}};
  if (f.count("device")) args["device"] = f["device"];
  if (f.count("slot")) args["slot"] = std::stoul(f["slot"]);
  json r = call("session.create", args);
  print(r, [&] {
    const json& n = r["network"];
    std::cout << "session " << r["id"].get<std::string>() << " on " << r["device"].get<std::string>()
              << "\n  address " << n["address"].get<std::string>() << " gateway "
              << n["gateway"].get<std::string>() << " dns " << n["dns"].get<std::string>() << " mtu "
              << n["mtu"] << "\n  address6 " << n["address6"].get<std::string>() << " gateway6 "
              << n["gateway6"].get<std::string>() << "\n  mac " << n["mac"].get<std::string>() << "\n  trust "
              << n["ca_certificate"].get<std::string>() << "\n";
  });
  return 0;
}

int update(const Args& a) {
  auto f = flags(a, 1, {"policy"});
  if (!f.count("policy")) throw UsageError("missing --policy FILE");
  json r = call("session.update", {{"id", arg(a, 0, "ID")}, {"policy", read_file(f["policy"])}});
  print(r, [&] {
    std::cout << "session " << r["id"].get<std::string>() << " policy v" << r["policy_version"] << "\n";
  });
  return 0;
}

int delete_session(const Args& a) {
  auto f = flags(a, 1, {"detach"});
  json args = {{"id", arg(a, 0, "ID")}};
  if (f.count("detach")) {
    if (f["detach"] != "yes" && f["detach"] != "no") throw UsageError("--detach must be yes or no");
    args["detach"] = f["detach"] == "yes";
  }
  json r = call("session.delete", args);
  print(r, [&] { std::cout << "deleted " << r["deleted"].get<std::string>() << "\n"; });
  return 0;
}

uint16_t port_flag(std::map<std::string, std::string>& f) {
  if (!f.count("port")) throw UsageError("missing --port PORT");
  const unsigned long port = std::stoul(f["port"]);
  if (port == 0 || port > 65535) throw UsageError("--port must be 1..65535");
  return static_cast<uint16_t>(port);
}

void print_exposure(const json& e) {
  std::cout << "port " << e["port"] << "/" << e["proto"].get<std::string>() << " "
            << e["mode"].get<std::string>() << " via " << e["listen"].get<std::string>() << " (IPv"
            << e["family"] << " to the guest)\n";
}

int expose(const Args& a) {
  auto f = flags(a, 1, {"port", "proto", "mode", "family", "listen-port"});
  json args = {{"id", arg(a, 0, "ID")}, {"port", port_flag(f)}};
  if (f.count("proto")) args["proto"] = f["proto"];
  if (f.count("mode")) args["mode"] = f["mode"];
  if (f.count("family")) args["family"] = std::stoul(f["family"]);
  if (f.count("listen-port")) args["listen_port"] = std::stoul(f["listen-port"]);
  json r = call("session.expose", args);
  print(r, [&] { print_exposure(r); });
  return 0;
}

int unexpose(const Args& a) {
  auto f = flags(a, 1, {"port"});
  json r = call("session.unexpose", {{"id", arg(a, 0, "ID")}, {"port", port_flag(f)}});
  print(r, [&] {
    std::cout << "port " << r["port"] << " of " << r["session"].get<std::string>() << " closed\n";
  });
  return 0;
}

int exposed(const Args& a) {
  json r = call("session.exposed", {{"id", arg(a, 0, "ID")}});
  print(r, [&] {
    for (const auto& e : r) print_exposure(e);
  });
  return 0;
}

int ticket(const Args& a) {
  auto f = flags(a, 1, {"port", "ttl"});
  json args = {{"id", arg(a, 0, "ID")}, {"port", port_flag(f)}};
  if (f.count("ttl")) args["ttl_s"] = std::stoul(f["ttl"]);
  json r = call("session.ticket", args);
  print(r, [&] {
    std::cout << r["ticket"].get<std::string>() << "\n  one use, until " << r["expires"].get<std::string>()
              << "\n  " << r["url"].get<std::string>() << "\n  or the header \""
              << r["header"].get<std::string>() << "\" to http://" << r["listen"].get<std::string>() << "/\n";
  });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"list", "session list", list},
    {"parked", "session parked", parked},
    {"show", "session show ID", show},
    {"create", "session create ID --policy FILE [--device TAP] [--slot N]", create},
    {"update", "session update ID --policy FILE", update},
    {"delete", "session delete ID [--detach yes|no]", delete_session},
    {"expose",
     "session expose ID --port PORT [--proto tcp] [--mode ticket|public] [--family 4|6] [--listen-port N]",
     expose},
    {"unexpose", "session unexpose ID --port PORT", unexpose},
    {"exposed", "session exposed ID", exposed},
    {"ticket", "session ticket ID --port PORT [--ttl SECONDS]", ticket},
};

}  // namespace session_cli
}  // namespace

std::span<const Verb> session_verbs() { return session_cli::kVerbs; }

}  // namespace zn::znctl
