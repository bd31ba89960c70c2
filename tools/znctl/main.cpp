// znctl: inspect and control zerod, the way bpftool does the kernel.
//   znctl [-j|--json] [-p|--pretty] [--socket PATH] [--state-dir DIR] [--pin-root DIR] OBJECT VERB [ARGS]
// Every verb answers `help`; with -j every result and every error is JSON.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <unistd.h>

#include <cstring>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "broker/audit/log.h"
#include "broker/audit/store.h"
#include "broker/policy/compiled.h"
#include "broker/control/server.h"
#include "broker/policy/parser.h"
#include "zn_abi.h"

namespace {

using json = nlohmann::json;
namespace zb = zn::broker;

struct Options {
  bool json_out = false, pretty = false;
  std::string socket = "/run/zeroness/zerod.sock";
  std::string state_dir = "/var/lib/zeroness";
  std::string pin_root = "/sys/fs/bpf/zeroness";
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Options g;

void print(const json& value, const std::function<void()>& plain) {
  if (g.json_out)
    std::cout << value.dump(g.pretty ? 2 : -1) << std::endl;
  else
    plain();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Calls zerod; a refusal becomes an exception carrying zerod's message.
json call(const std::string& verb, const json& args = json::object()) {
  json reply = zb::control_call(g.socket, verb, args);
  if (!reply.value("ok", false)) {
    const json& e = reply["error"];
    std::string msg = e.value("message", "error");
    throw std::runtime_error(msg);
  }
  return reply["result"];
}

// "--name value" options after the positional arguments.
std::map<std::string, std::string> flags(const std::vector<std::string>& args, size_t from,
                                         std::initializer_list<const char*> allowed) {
  std::map<std::string, std::string> out;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= args.size()) throw UsageError("unexpected argument '" + a + "'");
    const std::string name = a.substr(2);
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* k) { return name == k; }) == allowed.end())
      throw UsageError("unknown option '" + a + "'");
    out[name] = args[++i];
  }
  return out;
}

const std::string& arg(const std::vector<std::string>& args, size_t i, const char* what) {
  if (i >= args.size()) throw UsageError(std::string("missing ") + what);
  return args[i];
}

std::chrono::system_clock::time_point parse_time(const std::string& text) {
  if (!text.empty() && text[0] == '-') {  // "-10m", "-2h", "-30s", "-1d"
    const long n = std::stol(text.substr(1, text.size() - 2));
    const char unit = text.back();
    const long secs = unit == 's' ? n : unit == 'm' ? n * 60 : unit == 'h' ? n * 3600 : unit == 'd' ? n * 86400 : -1;
    if (secs < 0) throw UsageError("relative time is -N[s|m|h|d]: " + text);
    return std::chrono::system_clock::now() - std::chrono::seconds(secs);
  }
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) throw UsageError("time is RFC 3339 UTC (2026-11-29T12:00:00Z) or -N[s|m|h|d]: " + text);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string ip_text(int family, const void* bytes) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family, bytes, buf, sizeof(buf));
  return buf;
}

// Walks a pinned map and decodes the layouts of bpf/include/zn_abi.h.
// True if fd is a BPF map (not a program or link): the kernel says which in
// the fd's fdinfo ("map_type:" lines only for maps). libbpf 1.1 has no typed
// info call to ask instead.
bool is_map_fd(int fd) {
  std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("map_type:", 0) == 0) return true;
  return false;
}

json dump_map(int fd, const std::string& name) {
  json out = json::array();
  std::vector<uint8_t> key(256), next(256), value(4096);
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, next.data()) == 0) {
    key = next;
    prev = key.data();
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) != 0) continue;
    if (name == "zn_sessions") {
      uint32_t ifindex;
      zn_session s;
      std::memcpy(&ifindex, key.data(), sizeof(ifindex));
      std::memcpy(&s, value.data(), sizeof(s));
      json ports = json::array();
      for (uint16_t p : s.steered_ports)
        if (p) ports.push_back(ntohs(p));
      out.push_back({{"ifindex", ifindex}, {"session_idx", s.session_idx},
                     {"guest_ip4", ip_text(AF_INET, &s.guest_ip4)}, {"gateway_ip4", ip_text(AF_INET, &s.gateway_ip4)},
                     {"guest_ip6", ip_text(AF_INET6, s.guest_ip6)}, {"steered_ports", ports},
                     {"event_rate", s.event_rate}, {"event_burst", s.event_burst}});
    } else if (name == "zn_l4_allow") {
      zn_l4_key k;
      zn_l4_value v;
      std::memcpy(&k, key.data(), sizeof(k));
      std::memcpy(&v, value.data(), sizeof(v));
      out.push_back({{"session_idx", k.session_idx},
                     {"prefix", ip_text(k.family == 6 ? AF_INET6 : AF_INET, k.addr) + "/" +
                                    std::to_string(k.prefixlen - ZN_L4_KEY_FIXED_BITS)},
                     {"port", ntohs(k.port)}, {"rule", v.rule_id}});
    } else if (name == "zn_listeners") {
      zn_listeners l;
      std::memcpy(&l, value.data(), sizeof(l));
      out.push_back({{"proxy", ip_text(AF_INET, &l.proxy_ip4) + ":" + std::to_string(ntohs(l.proxy_port))},
                     {"proxy6", ip_text(AF_INET6, l.proxy_ip6)},
                     {"dns", ip_text(AF_INET, &l.dns_ip4) + ":" + std::to_string(ntohs(l.dns_port))},
                     {"dns6", ip_text(AF_INET6, l.dns_ip6)}});
    } else if (name == "zn_l4_count") {
      uint32_t idx, count;
      std::memcpy(&idx, key.data(), sizeof(idx));
      std::memcpy(&count, value.data(), sizeof(count));
      if (count) out.push_back({{"session_idx", idx}, {"rules", count}});
    } else {
      throw UsageError("map dump decodes zn_sessions, zn_l4_allow, zn_listeners and zn_l4_count; "
                       "counters: znctl stats");
    }
  }
  return out;
}

// ---- verbs ----

using Args = std::vector<std::string>;
using Verb = std::function<int(const Args&)>;
struct VerbEntry {
  const char* usage;
  Verb run;
};

void print_session_line(const json& s) {
  std::printf("%-16s idx %-4d %-10s %-18s %-22s policy v%llu%s\n", s["id"].get<std::string>().c_str(),
              s["session_idx"].get<int>(), s["device"].get<std::string>().c_str(),
              s["network"]["address"].get<std::string>().c_str(), s["network"]["address6"].get<std::string>().c_str(),
              static_cast<unsigned long long>(s["policy_version"].get<uint64_t>()),
              s["adopted"].get<bool>() ? " (adopted)" : "");
}

std::map<std::string, std::map<std::string, VerbEntry>> verbs() {
  std::map<std::string, std::map<std::string, VerbEntry>> t;
  t["session"]["list"] = {"session list", [](const Args&) {
                            json r = call("session.list");
                            print(r, [&] { for (const auto& s : r) print_session_line(s); });
                            return 0;
                          }};
  t["session"]["show"] = {"session show ID", [](const Args& a) {
                            json r = call("session.show", {{"id", arg(a, 0, "ID")}});
                            print(r, [&] { std::cout << r.dump(2) << "\n"; });
                            return 0;
                          }};
  t["session"]["create"] = {
      "session create ID --policy FILE [--device TAP] [--slot N]", [](const Args& a) {
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
                    << n["gateway6"].get<std::string>() << "\n  mac " << n["mac"].get<std::string>()
                    << "\n  trust " << n["ca_certificate"].get<std::string>() << "\n";
        });
        return 0;
      }};
  t["session"]["update"] = {"session update ID --policy FILE", [](const Args& a) {
                              auto f = flags(a, 1, {"policy"});
                              if (!f.count("policy")) throw UsageError("missing --policy FILE");
                              json r = call("session.update", {{"id", arg(a, 0, "ID")}, {"policy", read_file(f["policy"])}});
                              print(r, [&] { std::cout << "session " << r["id"].get<std::string>() << " policy v" << r["policy_version"] << "\n"; });
                              return 0;
                            }};
  t["session"]["delete"] = {"session delete ID", [](const Args& a) {
                              json r = call("session.delete", {{"id", arg(a, 0, "ID")}});
                              print(r, [&] { std::cout << "deleted " << r["deleted"].get<std::string>() << "\n"; });
                              return 0;
                            }};
  t["approval"]["list"] = {"approval list", [](const Args&) {
                             json r = call("approval.list");
                             print(r, [&] {
                               for (const auto& h : r)
                                 std::cout << h["ticket"] << "  " << h["session"].get<std::string>() << "  "
                                           << h["method"].get<std::string>() << " "
                                           << h["url"].get<std::string>()
                                           << "  expires " << h["expires"].get<std::string>() << "\n";
                             });
                             return 0;
                           }};
  auto decide = [](const std::string& d) {
    return [d](const Args& a) {
      const std::string& text = arg(a, 0, "TICKET");
      if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError("TICKET is a number (see approval list)");
      json r = call("approval." + d, {{"ticket", std::stoull(text)}});
      print(r, [&] { std::cout << (d == "allow" ? "approved " : "denied ") << r["ticket"] << "\n"; });
      return 0;
    };
  };
  t["approval"]["allow"] = {"approval allow TICKET", decide("allow")};
  t["approval"]["deny"] = {"approval deny TICKET", decide("deny")};
  t["policy"]["check"] = {"policy check FILE", [](const Args& a) {
                            auto compiled = zb::CompiledPolicy::compile(zb::parse_policy(read_file(arg(a, 0, "FILE"))));
                            const auto& p = compiled->policy();
                            json r = {{"ok", true}, {"allow", p.allow.size()}, {"deny", p.deny.size()},
                                      {"l4", compiled->l4_targets().size()}, {"resources", p.resources.size()}};
                            print(r, [&] {
                              std::cout << "ok: " << p.allow.size() << " allow, " << p.deny.size() << " deny, "
                                        << compiled->l4_targets().size() << " L4, " << p.resources.size()
                                        << " resource(s)\n";
                            });
                            return 0;
                          }};
  t["policy"]["show"] = {"policy show ID", [](const Args& a) {
                           json r = call("session.show", {{"id", arg(a, 0, "ID")}})["policy"];
                           print(r, [&] { std::cout << r.dump(2) << "\n"; });
                           return 0;
                         }};
  t["prog"]["show"] = {"prog show", [](const Args&) {
                         json r = json::array();
                         for (const char* name : {"tap_ingress", "tap_egress"}) {
                           const std::string path = g.pin_root + "/" + name;
                           int fd = bpf_obj_get(path.c_str());
                           if (fd < 0) throw std::runtime_error("no pinned program " + path);
                           bpf_prog_info info{};
                           uint32_t len = sizeof(info);
                           bpf_obj_get_info_by_fd(fd, &info, &len);
                           ::close(fd);
                           r.push_back({{"id", info.id}, {"name", info.name}, {"pinned", path},
                                        {"run_cnt", info.run_cnt}, {"xlated_bytes", info.xlated_prog_len},
                                        {"jited_bytes", info.jited_prog_len}, {"maps", info.nr_map_ids}});
                         }
                         print(r, [&] {
                           for (const auto& p : r)
                             std::printf("%u: sched_cls  name %s  pinned %s\n\txlated %uB  jited %uB  maps %u\n",
                                         p["id"].get<unsigned>(), p["name"].get<std::string>().c_str(),
                                         p["pinned"].get<std::string>().c_str(), p["xlated_bytes"].get<unsigned>(),
                                         p["jited_bytes"].get<unsigned>(), p["maps"].get<unsigned>());
                         });
                         return 0;
                       }};
  t["map"]["list"] = {"map list", [](const Args&) {
                        json r = json::array();
                        for (const auto& e : std::filesystem::directory_iterator(g.pin_root)) {
                          int fd = bpf_obj_get(e.path().c_str());
                          if (fd < 0) continue;
                          // Programs are pinned beside the maps; the info call
                          // would fill a map struct with a program's fields.
                          bpf_map_info info{};
                          uint32_t len = sizeof(info);
                          if (is_map_fd(fd) && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
                            r.push_back({{"id", info.id}, {"name", info.name}, {"type", info.type},
                                         {"key_bytes", info.key_size}, {"value_bytes", info.value_size},
                                         {"max_entries", info.max_entries}, {"pinned", e.path().string()}});
                          ::close(fd);
                        }
                        print(r, [&] {
                          for (const auto& m : r)
                            std::printf("%u: %-14s key %uB  value %uB  max_entries %u  pinned %s\n",
                                        m["id"].get<unsigned>(), m["name"].get<std::string>().c_str(),
                                        m["key_bytes"].get<unsigned>(), m["value_bytes"].get<unsigned>(),
                                        m["max_entries"].get<unsigned>(), m["pinned"].get<std::string>().c_str());
                        });
                        return 0;
                      }};
  t["map"]["dump"] = {"map dump zn_sessions|zn_l4_allow|zn_listeners|zn_l4_count", [](const Args& a) {
                        const std::string name = arg(a, 0, "NAME");
                        const std::string path = g.pin_root + "/" + name;
                        int fd = bpf_obj_get(path.c_str());
                        if (fd < 0) throw std::runtime_error("no pinned map " + path);
                        json r = dump_map(fd, name);
                        ::close(fd);
                        print(r, [&] { for (const auto& e : r) std::cout << e.dump() << "\n"; });
                        return 0;
                      }};
  t["stats"]["show"] = {"stats show [ID]", [](const Args& a) {
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
                        }};
  t["events"]["watch"] = {"events watch", [](const Args&) {
                            zb::control_stream(g.socket, "events", json::object(), [](const json& line) {
                              if (line.contains("heartbeat") || line.contains("ok")) return true;
                              print(line, [&] {
                                std::cout << line.value("session", "?") << "  " << line.value("event", "") << std::endl;
                              });
                              return true;
                            });
                            return 0;
                          }};
  t["status"]["show"] = {"status show", [](const Args&) {
                           json r = call("status");
                           print(r, [&] { std::cout << r.dump(2) << "\n"; });
                           return 0;
                         }};
  auto audit_db = [] { return g.state_dir + "/audit.db"; };
  t["audit"]["query"] = {"audit query [--sid ID] [--event NAME|CATEGORY:] [--since T] [--until T] [--limit N]",
                         [audit_db](const Args& a) {
                           auto f = flags(a, 0, {"sid", "event", "since", "until", "limit"});
                           zb::AuditQuery q;
                           if (f.count("sid")) q.sid = f["sid"];
                           if (f.count("event")) q.event = f["event"];
                           if (f.count("since")) q.since = parse_time(f["since"]);
                           if (f.count("until")) q.until = parse_time(f["until"]);
                           if (f.count("limit")) q.limit = std::stoul(f["limit"]);
                           zb::AuditStore store(audit_db(), zb::AuditStore::Mode::kReadOnly);
                           auto records = store.query(q);
                           json r = json::array();
                           for (const auto& rec : records) r.push_back(json::parse(rec.json_line()));
                           print(r, [&] {
                             for (const auto& rec : records)
                               std::cout << rec.ts << "  " << rec.event << "  " << rec.sid << "  " << rec.detail.dump() << "\n";
                           });
                           return 0;
                         }};
  t["audit"]["tail"] = {"audit tail [--sid ID] [--event NAME]", [audit_db](const Args& a) {
                          auto f = flags(a, 0, {"sid", "event"});
                          zb::AuditStore store(audit_db(), zb::AuditStore::Mode::kReadOnly);
                          uint64_t last = 0;
                          while (true) {
                            zb::AuditQuery q;
                            if (f.count("sid")) q.sid = f["sid"];
                            if (f.count("event")) q.event = f["event"];
                            q.since = std::chrono::system_clock::now() - std::chrono::hours(24);
                            q.limit = zb::AuditQuery::kMaxLimit;
                            for (const auto& rec : store.query(q)) {
                              if (rec.seq <= last) continue;
                              last = rec.seq;
                              print(json::parse(rec.json_line()), [&] {
                                std::cout << rec.ts << "  " << rec.event << "  " << rec.sid << "  " << rec.detail.dump() << std::endl;
                              });
                            }
                            std::this_thread::sleep_for(std::chrono::milliseconds(500));
                          }
                          return 0;
                        }};
  t["audit"]["verify"] = {"audit verify", [audit_db](const Args&) {
                            auto v = zb::AuditLog::verify_file(audit_db());
                            json r = {{"ok", v.ok}, {"records", v.records}, {"reason", v.reason}};
                            if (v.first_bad_seq) r["first_bad_seq"] = *v.first_bad_seq;
                            print(r, [&] {
                              if (v.ok)
                                std::cout << "audit chain ok: " << v.records << " records\n";
                              else
                                std::cout << "audit chain BROKEN at seq " << v.first_bad_seq.value_or(0) << ": " << v.reason << "\n";
                            });
                            return v.ok ? 0 : 3;
                          }};
  return t;
}

void usage(std::ostream& out, const std::map<std::string, std::map<std::string, VerbEntry>>& table,
           const std::string& only = "") {
  out << "usage: znctl [-j|--json] [-p|--pretty] [--socket PATH] [--state-dir DIR] [--pin-root DIR] OBJECT VERB\n";
  for (const auto& [object, vs] : table) {
    if (!only.empty() && object != only) continue;
    for (const auto& [verb, entry] : vs) out << "  znctl " << entry.usage << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const auto table = verbs();
  try {
    while (!args.empty() && args[0].rfind("-", 0) == 0) {
      const std::string o = args[0];
      args.erase(args.begin());
      if (o == "-j" || o == "--json") g.json_out = true;
      else if (o == "-p" || o == "--pretty") g.json_out = g.pretty = true;
      else if ((o == "--socket" || o == "--state-dir" || o == "--pin-root") && !args.empty()) {
        (o == "--socket" ? g.socket : o == "--state-dir" ? g.state_dir : g.pin_root) = args[0];
        args.erase(args.begin());
      } else if (o == "-h" || o == "--help") {
        usage(std::cout, table);
        return 0;
      } else throw UsageError("unknown option '" + o + "'");
    }
    if (args.empty() || args[0] == "help") {
      usage(std::cout, table);
      return args.empty() ? 2 : 0;
    }
    auto object = table.find(args[0]);
    if (object == table.end()) throw UsageError("unknown object '" + args[0] + "'");
    // "znctl stats" and "znctl events" have one verb each: it may be left out.
    std::string verb = args.size() > 1 ? args[1] : "";
    size_t rest = 2;
    if (!object->second.count(verb) && object->second.size() == 1 && verb != "help") {
      verb = object->second.begin()->first;
      rest = 1;
    }
    if (verb.empty() || verb == "help" || (args.size() > rest && args[rest] == "help")) {
      usage(std::cout, table, args[0]);
      return 0;
    }
    auto entry = object->second.find(verb);
    if (entry == object->second.end()) throw UsageError("unknown verb '" + args[0] + " " + verb + "'");
    return entry->second.run(std::vector<std::string>(args.begin() + static_cast<long>(rest), args.end()));
  } catch (const UsageError& e) {
    if (g.json_out) std::cout << json{{"error", e.what()}}.dump() << std::endl;
    else {
      std::cerr << "znctl: " << e.what() << "\n";
      usage(std::cerr, table);
    }
    return 2;
  } catch (const zb::PolicyError& e) {
    if (g.json_out) std::cout << json{{"error", e.what()}, {"path", e.path()}}.dump() << std::endl;
    else std::cerr << "znctl: policy error at " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (g.json_out) std::cout << json{{"error", e.what()}}.dump() << std::endl;
    else std::cerr << "znctl: " << e.what() << "\n";
    return 1;
  }
}
