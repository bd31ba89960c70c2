#include "broker/vms/vm_registry.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

// The console as JSON can carry it: a byte that is not part of a valid
// UTF-8 sequence (a guest may print anything) becomes U+FFFD.
std::string valid_utf8(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c < 0x80) {
      out += in[i++];
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    }
    bool ok = len != 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(in[i + k]);
      ok = (d & 0xc0) == 0x80;
      cp = (cp << 6) | (d & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
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
    const std::string name = vm_name(entry.path().filename().string());
    vmm::VmCgroup::remove_leftover(name);
    vmm::VmCgroup::remove_leftover(name + "-kvm-probe");
    fs::remove_all(entry.path(), ignored);
  }
  fs::permissions(options_.directory, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
}

std::string VmRegistry::vm_name(const std::string& session) const {
  return options_.instance.empty() ? session : options_.instance + "-" + session;
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
  nlohmann::json out = {{"session", session},
                        {"backend", r.backend},
                        {"accel", vmm::accel_name(r.vm->accel())},
                        {"pid", r.vm->pid()},
                        {"uid", r.uid},
                        {"memory_mib", r.memory_mib},
                        {"kernel", r.kernel},
                        {"initrd", r.initrd},
                        {"state", running ? "running" : "exited"},
                        {"cgroup", "zeroness/" + vm_name(session)}};
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
    forget_locked(it, 0ms);
  }
  vmm::VmSpec spec;
  spec.name = vm_name(request.session);
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
  if (!options_.agent_binary.empty() && options_.agent_config && options_.agent_port) {
    spec.boot.agent_binary = slurp(options_.agent_binary);
    spec.boot.agent_config = options_.agent_config(request.session);
    spec.boot.agent_port = options_.agent_port;
    spec.boot.agent_transport = backend->agent_transport();
  }
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
  r.agent_channels = !r.vm->agent_sockets().empty();
  if (r.agent_channels && options_.agent_over_tcp) options_.agent_over_tcp(request.session, false);
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
  forget_locked(it, 2s);
  return true;
}

void VmRegistry::forget_locked(std::map<std::string, Running>::iterator it, std::chrono::milliseconds grace) {
  it->second.vm->stop(grace);
  std::error_code ignored;
  fs::remove_all(it->second.directory, ignored);
  if (it->second.agent_channels && options_.agent_over_tcp) options_.agent_over_tcp(it->first, true);
  vms_.erase(it);
}

std::vector<std::string> VmRegistry::agent_channels(const std::string& session) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(session);
  // An exited VM's too: connecting says the VM is not there, where TCP
  // would only time out.
  if (it == vms_.end()) return {};
  return it->second.vm->agent_sockets();
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
  return valid_utf8(text);
}

ConsoleChunk VmRegistry::console_from(const std::string& session, uint64_t offset, size_t max_bytes) {
  std::string path;
  ConsoleChunk chunk;
  {
    std::lock_guard lock(mu_);
    auto it = vms_.find(session);
    if (it == vms_.end()) throw VmError("session '" + session + "' runs no VM");
    path = it->second.vm->console_path();
    // Asked before reading: a VM that has exited wrote all it ever will.
    chunk.running = it->second.vm->running();
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto end = static_cast<uint64_t>(std::max<std::streamoff>(in.tellg(), 0));
  if (offset > end) offset = end;  // a console never shrinks; a wrong offset restarts at the end
  std::string bytes(static_cast<size_t>(std::min<uint64_t>(end - offset, max_bytes)), '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  // A UTF-8 sequence cut by the end of what was read waits for the next call
  // (unless the VM is gone and no more will come).
  size_t keep = bytes.size();
  for (size_t back = 1; back <= 3 && back <= bytes.size(); ++back) {
    const auto c = static_cast<unsigned char>(bytes[bytes.size() - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (need > back && chunk.running) keep = bytes.size() - back;
    break;
  }
  bytes.resize(keep);
  chunk.offset = offset + keep;
  chunk.text = valid_utf8(bytes);
  return chunk;
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
