#include "broker/control/vm_verbs.h"

#include <spdlog/spdlog.h>

namespace zn::broker {
namespace {

using json = nlohmann::json;

std::string text(const json& args, const char* key, bool required) {
  if (!args.contains(key)) {
    if (required) throw VmError(std::string("missing \"") + key + "\" (string)");
    return "";
  }
  if (!args[key].is_string()) throw VmError(std::string("\"") + key + "\" must be a string");
  return args[key].get<std::string>();
}

uint32_t number(const json& args, const char* key, uint32_t fallback) {
  if (!args.contains(key)) return fallback;
  if (!args[key].is_number_unsigned() || args[key].get<uint64_t>() > UINT32_MAX)
    throw VmError(std::string("\"") + key + "\" must be a positive integer");
  return args[key].get<uint32_t>();
}

bool flag(const json& args, const char* key, bool fallback) {
  if (!args.contains(key)) return fallback;
  if (!args[key].is_boolean()) throw VmError(std::string("\"") + key + "\" must be true or false");
  return args[key].get<bool>();
}

}  // namespace

void register_vm_verbs(ControlServer& server, VmRegistry& vms) {
  server.handle("vm.run", [&vms](const json& args) {
    VmRunRequest r;
    r.session = text(args, "session", true);
    r.kernel = text(args, "kernel", true);
    r.initrd = text(args, "initrd", true);
    r.memory_mib = number(args, "memory_mib", r.memory_mib);
    r.vcpus = number(args, "vcpus", r.vcpus);
    if (args.contains("backend")) r.backend = text(args, "backend", true);
    r.user_data = text(args, "user_data", false);
    if (r.user_data.size() > 64 * 1024) throw VmError("user_data is at most 64 KiB");
    r.poweroff_after = flag(args, "poweroff", r.poweroff_after);
    r.disk = text(args, "disk", false);
    r.encrypt_disk = flag(args, "encrypt", r.encrypt_disk);
    json vm = vms.run(r);
    spdlog::info("vm of session {} started ({}, {}, pid {})", r.session, vm["backend"].get<std::string>(),
                 vm["accel"].get<std::string>(), vm["pid"].get<int>());
    return vm;
  });
  server.handle("vm.list", [&vms](const json&) { return vms.list(); });
  server.handle("vm.stop", [&vms](const json& args) {
    const std::string session = text(args, "session", true);
    if (!vms.stop(session)) throw VmError("session '" + session + "' runs no VM");
    spdlog::info("vm of session {} stopped", session);
    return json{{"stopped", session}};
  });
  // Without "offset": the console's last "bytes". With it: what follows that
  // offset, where to continue and whether the VM still runs (znctl's
  // --follow polls this until the VM has exited and nothing is left).
  server.handle("vm.console", [&vms](const json& args) {
    const std::string session = text(args, "session", true);
    const uint32_t bytes = number(args, "bytes", 64 * 1024);
    if (bytes == 0 || bytes > (1u << 20)) throw VmError("\"bytes\" must be 1..1048576");
    if (!args.contains("offset")) return json{{"console", vms.console(session, bytes)}};
    if (!args["offset"].is_number_unsigned()) throw VmError("\"offset\" must be a non-negative integer");
    const ConsoleChunk c = vms.console_from(session, args["offset"].get<uint64_t>(), bytes);
    return json{{"console", c.text}, {"offset", c.offset}, {"running", c.running}};
  });
  server.handle("vm.backends", [&vms](const json&) { return vms.backends(); });
}

}  // namespace zn::broker
