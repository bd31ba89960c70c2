// znctl vm: a session's microVM, run on the session's TAP and stopped with it.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "command.h"

namespace zn::znctl {

namespace {
namespace vm_cli {

// "256", "256M", "1G" -> MiB.
uint32_t mebibytes(const std::string& text) {
  size_t used = 0;
  unsigned long n = 0;
  try {
    n = std::stoul(text, &used);
  } catch (const std::exception&) {
    throw UsageError("--memory wants a size such as 256M or 1G");
  }
  const std::string unit = text.substr(used);
  if (unit == "G" || unit == "g")
    n *= 1024;
  else if (!unit.empty() && unit != "M" && unit != "m")
    throw UsageError("--memory wants a size such as 256M or 1G");
  return static_cast<uint32_t>(n);
}

bool yes(const std::string& value, const char* option) {
  if (value == "yes" || value == "true") return true;
  if (value == "no" || value == "false") return false;
  throw UsageError(std::string(option) + " wants yes or no");
}

void print_vm_line(const json& v) {
  std::string disk;
  if (v.contains("disk"))
    disk = "  disk " + v["disk"]["base"].get<std::string>() +
           (v["disk"]["encrypted"].get<bool>() ? " (encrypted overlay)" : " (plain overlay)");
  std::printf("%-16s %-6s %-4s pid %-7d %5u MiB  %s%s%s\n", v["session"].get<std::string>().c_str(),
              v["backend"].get<std::string>().c_str(), v["accel"].get<std::string>().c_str(),
              v["pid"].get<int>(), v["memory_mib"].get<unsigned>(), v["state"].get<std::string>().c_str(),
              v.contains("exit") ? (" (" + v["exit"].get<std::string>() + ")").c_str() : "", disk.c_str());
}

int run(const Args& a) {
  auto f = flags(a, 1, {"kernel", "initrd", "disk", "encrypt", "memory", "backend", "user-data", "poweroff"});
  if (!f.count("kernel")) throw UsageError("missing --kernel FILE");
  if (!f.count("initrd")) throw UsageError("missing --initrd FILE");
  json args = {{"session", arg(a, 0, "ID")}, {"kernel", f["kernel"]}, {"initrd", f["initrd"]}};
  if (f.count("memory")) args["memory_mib"] = mebibytes(f["memory"]);
  if (f.count("backend")) args["backend"] = f["backend"];
  if (f.count("user-data")) args["user_data"] = read_file(f["user-data"]);
  if (f.count("poweroff")) args["poweroff"] = yes(f["poweroff"], "--poweroff");
  if (f.count("disk")) args["disk"] = f["disk"];
  if (f.count("encrypt")) {
    if (!f.count("disk")) throw UsageError("--encrypt goes with --disk");
    args["encrypt"] = yes(f["encrypt"], "--encrypt");
  }
  json r = call("vm.run", args);
  print(r, [&] { print_vm_line(r); });
  return 0;
}

int list(const Args&) {
  json r = call("vm.list");
  print(r, [&] {
    for (const auto& v : r) print_vm_line(v);
  });
  return 0;
}

int stop(const Args& a) {
  json r = call("vm.stop", {{"session", arg(a, 0, "ID")}});
  print(r, [&] { std::cout << "stopped " << r["stopped"].get<std::string>() << "\n"; });
  return 0;
}

// --follow polls vm.console from an offset and prints what is new, until the
// VM has exited and all it wrote is printed (or ^C).
int console(const Args& a) {
  const std::string id = arg(a, 0, "ID");
  bool follow = false;
  for (size_t i = 1; i < a.size(); ++i) {
    if (a[i] != "--follow") throw UsageError("unexpected argument '" + a[i] + "'");
    follow = true;
  }
  if (!follow) {
    json r = call("vm.console", {{"session", id}});
    print(r, [&] { std::cout << r["console"].get<std::string>(); });
    return 0;
  }
  uint64_t offset = 0;
  for (;;) {
    json r = call("vm.console", {{"session", id}, {"offset", offset}});
    const std::string text = r["console"].get<std::string>();
    offset = r["offset"].get<uint64_t>();
    // With -j, one JSON object per poll that had something (or the last).
    if (!text.empty() || !r["running"].get<bool>()) print(r, [&] { std::cout << text << std::flush; });
    if (!r["running"].get<bool>() && text.empty()) return 0;
    if (text.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int backends(const Args&) {
  json r = call("vm.backends");
  print(r, [&] {
    for (const auto& b : r)
      std::cout << b["name"].get<std::string>() << ": "
                << (b["available"].get<bool>() ? "available"
                                               : "unavailable (" + b["reason"].get<std::string>() + ")")
                << "\n";
  });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"run",
     "vm run ID --kernel K --initrd I [--disk BASE [--encrypt yes|no]] [--memory 256M] "
     "[--backend qemu|firecracker] [--user-data SCRIPT] [--poweroff yes]",
     run},
    {"list", "vm list", list},
    {"stop", "vm stop ID", stop},
    {"console", "vm console ID [--follow]", console},
    {"backends", "vm backends", backends},
};

}  // namespace vm_cli
}  // namespace

std::span<const Verb> vm_verbs() { return vm_cli::kVerbs; }

}  // namespace zn::znctl
