// znctl session: the sessions zerod runs, created and changed through it.
#include <cstdio>
#include <iostream>

#include "command.h"

namespace zn::znctl {

namespace {

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
  json r = call("session.delete", {{"id", arg(a, 0, "ID")}});
  print(r, [&] { std::cout << "deleted " << r["deleted"].get<std::string>() << "\n"; });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"list", "session list", list},
    {"show", "session show ID", show},
    {"create", "session create ID --policy FILE [--device TAP] [--slot N]", create},
    {"update", "session update ID --policy FILE", update},
    {"delete", "session delete ID", delete_session},
};

}  // namespace

std::span<const Verb> session_verbs() { return kVerbs; }

}  // namespace zn::znctl
