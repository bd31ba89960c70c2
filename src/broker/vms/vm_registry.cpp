#include "broker/vms/vm_registry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "vmm/host/tap_device.h"

namespace zn::broker {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void require_file(const std::string& path, const char* what) {
  if (path.empty() || path.front() != '/') throw VmError(std::string(what) + " must be an absolute path");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw VmError(std::string(what) + " " + path + " is not a readable file");
}

}  // namespace

VmRegistry::VmRegistry(const SessionDirectory& sessions, VmRegistryOptions options)
    : sessions_(sessions), options_(std::move(options)) {
  fs::create_directories(options_.directory);
  // A VM never outlives the zerod that launched it (PDEATHSIG): what a
  // previous one left (it was killed, or the host lost power) is removed,
  // directories and cgroups alike, so no overlay or console lingers.
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(options_.directory, ignored)) {
    const std::string name = entry.path().filename().string();
    vmm::VmCgroup::remove_leftover(name);
    vmm::VmCgroup::remove_leftover(name + "-kvm-probe");
    fs::remove_all(entry.path(), ignored);
  }
  fs::permissions(options_.directory, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
}

VmRegistry::~VmRegistry() {
  std::lock_guard lock(mu_);
  for (auto& [session, r] : vms_) {
    r.vm->stop(2s);
    std::error_code ignored;
    fs::remove_all(r.directory, ignored);
  }
}

nlohmann::json VmRegistry::describe(const std::string& session, Running& r) {
  const bool running = r.vm->running();
  nlohmann::json out = {
      {"session", session}, {"backend", r.backend}, {"accel", vmm::accel_name(r.vm->accel())},
      {"pid", r.vm->pid()}, {"uid", r.uid},         {"memory_mib", r.memory_mib},
      {"kernel", r.kernel}, {"initrd", r.initrd},   {"state", running ? "running" : "exited"}};
  if (!running) out["exit"] = r.vm->exit_status();
  // The base and whether the overlay is encrypted; the key is nowhere to show.
  if (!r.disk.empty()) out["disk"] = {{"base", r.disk}, {"encrypted", r.disk_encrypted}};
  return out;
}

nlohmann::json VmRegistry::run(const VmRunRequest& request) {
  require_file(request.kernel, "--kernel");
  require_file(request.initrd, "--initrd");
  if (!request.disk.empty()) {
    require_file(request.disk, "--disk");
    // zerod reads it as root; the VM reads it through a descriptor zerod opens.
    if (::access(request.disk.c_str(), R_OK) != 0)
      throw VmError("--disk " + request.disk + " cannot be read: " + std::strerror(errno));
  }
  if (request.memory_mib < 64 || request.memory_mib > 65536) throw VmError("--memory must be 64..65536 MiB");
  if (request.vcpus < 1 || request.vcpus > 16) throw VmError("vcpus must be 1..16");
  std::shared_ptr<vmm::VmBackend> backend;
  for (const auto& b : options_.backends)
    if (b->name() == request.backend) backend = b;
  if (!backend) throw VmError("no backend '" + request.backend + "' (qemu, firecracker)");
  if (auto why = backend->unavailable()) throw VmError(request.backend + " is unavailable here: " + *why);

  std::lock_guard lock(mu_);
  SessionPtr s = sessions_.get(request.session);
  if (!s) throw VmError("no session '" + request.session + "'");
  if (auto it = vms_.find(request.session); it != vms_.end()) {
    if (it->second.vm->running()) throw VmError("session '" + request.session + "' already runs a VM");
    it->second.vm->stop(0ms);
    std::error_code ignored;
    fs::remove_all(it->second.directory, ignored);
    vms_.erase(it);
  }
  vmm::VmSpec spec;
  spec.name = request.session;
  spec.directory = (fs::path(options_.directory) / request.session).string();
  spec.kernel = request.kernel;
  spec.initrd = request.initrd;
  spec.memory_mib = request.memory_mib;
  spec.vcpus = request.vcpus;
  // Its own uid: one VM's process cannot signal, trace or read another's.
  spec.uid = options_.uid_base + s->record.slot;
  spec.gid = spec.uid;
  spec.boot.network = s->net;
  spec.boot.hostname = request.session;
  spec.boot.ca_pem = slurp(options_.ca_cert_path);
  spec.boot.user_data = request.user_data;
  spec.boot.poweroff_after = request.poweroff_after;
  if (!request.disk.empty()) spec.disk = vmm::VmDisk{request.disk, request.encrypt_disk, ""};
  std::error_code ignored;
  fs::remove_all(spec.directory, ignored);
  fs::create_directories(spec.directory);
  if (::chown(spec.directory.c_str(), spec.uid, spec.gid) != 0 || ::chmod(spec.directory.c_str(), 0700) != 0)
    throw VmError("cannot prepare " + spec.directory);
  try {
    // EBUSY when something else (a lab's frame pump, another VMM) has it.
    spec.tap = vmm::open_tap(s->record.device);
  } catch (const std::exception& e) {
    fs::remove_all(spec.directory, ignored);
    throw VmError("cannot attach to " + s->record.device + ": " + e.what());
  }
  Running r;
  r.backend = backend->name();
  r.directory = spec.directory;
  r.kernel = request.kernel;
  r.initrd = request.initrd;
  r.memory_mib = request.memory_mib;
  r.uid = spec.uid;
  r.disk = request.disk;
  r.disk_encrypted = !request.disk.empty() && request.encrypt_disk;
  try {
    r.vm = backend->launch(std::move(spec));
  } catch (const std::exception& e) {
    fs::remove_all(r.directory, ignored);
    throw VmError(std::string("launch failed: ") + e.what());
  }
  auto [it, inserted] = vms_.emplace(request.session, std::move(r));
  return describe(it->first, it->second);
}

nlohmann::json VmRegistry::list() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (auto& [session, r] : vms_) out.push_back(describe(session, r));
  return out;
}

bool VmRegistry::stop(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(session);
  if (it == vms_.end()) return false;
  it->second.vm->stop(2s);
  std::error_code ignored;
  fs::remove_all(it->second.directory, ignored);
  vms_.erase(it);
  return true;
}

std::string VmRegistry::console(const std::string& session, size_t max_bytes) {
  std::string path;
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(session);
    if (it == vms_.end()) throw VmError("session '" + session + "' runs no VM");
    path = it->second.vm->console_path();
  }
  std::string text = slurp(path);
  if (text.size() > max_bytes) text.erase(0, text.size() - max_bytes);
  return text;
}

nlohmann::json VmRegistry::backends() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& b : options_.backends) {
    auto why = b->unavailable();
    out.push_back({{"name", b->name()}, {"available", !why}, {"reason", why.value_or("")}});
  }
  return out;
}

}  // namespace zn::broker
