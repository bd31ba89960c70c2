#include "vmm/microvm/vm_disk.h"

#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "userspace/net/unique_fd.h"

namespace zn::vmm {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

// A value inside QEMU's "key=value,..." options: a comma is doubled.
std::string opt_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

bool executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

// The tool's own words, trimmed, for an error message.
std::string said(const ToolResult& r) {
  std::string text = r.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 2000) text.resize(2000);
  return text.empty() ? (r.status < 0 ? "killed" : "exit " + std::to_string(r.status)) : text;
}

void run_or_throw(const std::vector<std::string>& argv, const char* step, const std::string& input = "",
                  int pass_fd = -1) {
  const ToolResult r = run_tool(argv, input, pass_fd);
  if (r.status != 0) throw std::runtime_error(std::string(step) + ": " + said(r));
}

void hand_to(const std::string& path, uid_t uid, gid_t gid) {
  if (::chown(path.c_str(), uid, gid) != 0 || ::chmod(path.c_str(), 0600) != 0)
    throw std::runtime_error("cannot hand " + path + " to the VM: " + errno_text());
}

// The qcow2 inside the container may grow to the whole virtual size plus
// its tables (under 1/4096 of it with 64 KiB clusters); LUKS1 puts its
// payload 2 MiB in. A sparse file: only what is written takes space.
uint64_t container_bytes(uint64_t virtual_size) {
  const uint64_t mib = 1ull << 20;
  const uint64_t want = virtual_size + virtual_size / 64 + 8 * mib;
  return (want + mib - 1) / mib * mib;
}

}  // namespace

DiskKey::DiskKey() {
  if (::sodium_init() < 0) throw std::runtime_error("libsodium cannot initialise");
  unsigned char raw[32];
  ::randombytes_buf(raw, sizeof raw);
  text_.resize(sodium_base64_ENCODED_LEN(sizeof raw, sodium_base64_VARIANT_ORIGINAL));
  ::sodium_bin2base64(text_.data(), text_.size(), raw, sizeof raw, sodium_base64_VARIANT_ORIGINAL);
  text_.resize(std::strlen(text_.c_str()));  // the encoder's terminating NUL
  ::sodium_memzero(raw, sizeof raw);
}

DiskKey::~DiskKey() { ::sodium_memzero(text_.data(), text_.size()); }

int key_pipe(const std::string& bytes, uid_t uid, gid_t gid) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + errno_text());
  net::UniqueFd reader(fds[0]), writer(fds[1]);
  // Reopening it through /proc/self/fd checks the pipe's own owner and mode
  // (its creator, 0600).
  if (::fchown(reader.get(), uid, gid) != 0)
    throw std::runtime_error("chown of the key pipe: " + errno_text());
  // Far below a pipe's capacity: the write completes without a reader.
  if (::write(writer.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    throw std::runtime_error("writing the key pipe: " + errno_text());
  return reader.release();
}

std::string find_tool(const std::string& name, const std::string& beside) {
  if (!beside.empty()) {
    std::string candidate = (fs::path(beside).parent_path() / name).string();
    if (executable(candidate)) return candidate;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty() || dir.front() != '/') continue;
    std::string candidate = dir + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return "";
}

ToolResult run_tool(const std::vector<std::string>& argv, const std::string& input, int pass_fd) {
  // The input goes in a memory file written whole before the tool starts,
  // not a pipe: a tool that exits without reading it (or fails at once)
  // would have the write raise SIGPIPE in zerod, or block on a full pipe.
  net::UniqueFd in(::memfd_create("zn-tool-input", MFD_CLOEXEC));
  if (!in) throw std::runtime_error("memfd: " + errno_text());
  for (size_t done = 0; done < input.size();) {
    const ssize_t n = ::write(in.get(), input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("writing the tool's input: " + errno_text());
    done += static_cast<size_t>(n);
  }
  if (::lseek(in.get(), 0, SEEK_SET) != 0) throw std::runtime_error("lseek: " + errno_text());
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + errno_text());
  net::UniqueFd out_r(out[0]), out_w(out[1]);
  // Above 3, so that dup2 onto 3 always makes a new descriptor (one without
  // FD_CLOEXEC) rather than leaving an fd that already is 3 as it was.
  net::UniqueFd passed;
  if (pass_fd >= 0) {
    passed.reset(::fcntl(pass_fd, F_DUPFD_CLOEXEC, 10));
    if (!passed) throw std::runtime_error("dup: " + errno_text());
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, in.get(), 0);
  ::posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  ::posix_spawn_file_actions_adddup2(&actions, out_w.get(), 2);
  if (passed) ::posix_spawn_file_actions_adddup2(&actions, passed.get(), 3);
  // Nothing else of zerod's (its descriptors are not all close-on-exec).
  ::posix_spawn_file_actions_addclosefrom_np(&actions, passed ? 4 : 3);
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char lang_env[] = "LC_ALL=C";
  char* env[] = {path_env, lang_env, nullptr};
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, argv.at(0).c_str(), &actions, &attr, args.data(), env);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(err));
  in.reset();
  out_w.reset();
  passed.reset();
  ToolResult result;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_r.get(), buf, sizeof buf);
    if (n > 0) {
      if (result.output.size() < 64 * 1024) result.output.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waitpid: " + errno_text());
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

BaseImage inspect_base(const std::string& qemu_img, const std::string& path, int fd) {
  const std::string what = "the base image " + path;
  const ToolResult r = run_tool({qemu_img, "info", "--output=json", "/proc/self/fd/3"}, "", fd);
  if (r.status != 0) throw std::runtime_error(what + ": qemu-img info: " + said(r));
  const nlohmann::json info = nlohmann::json::parse(r.output, nullptr, false);
  if (!info.is_object() || !info.contains("format") || !info["format"].is_string() ||
      !info.contains("virtual-size") || !info["virtual-size"].is_number_unsigned())
    throw std::runtime_error(what + ": qemu-img info said " + said(r));
  BaseImage base{path, info["format"].get<std::string>(), info["virtual-size"].get<uint64_t>()};
  if (base.format != "raw" && base.format != "qcow2")
    throw std::runtime_error(what + " is " + base.format + ", not raw or qcow2");
  if (base.virtual_size == 0) throw std::runtime_error(what + " is empty");
  if (info.contains("backing-filename") || info.contains("full-backing-filename"))
    throw std::runtime_error(what + " has a backing file of its own; give a standalone image");
  if (info.value("encrypted", false)) throw std::runtime_error(what + " is encrypted");
  const nlohmann::json specific = info.value("format-specific", nlohmann::json::object());
  if (specific.is_object() && specific.value("data", nlohmann::json::object()).contains("data-file"))
    throw std::runtime_error(what + " keeps its data in an external file; give a standalone image");
  return base;
}

std::string overlay_name(bool encrypted) { return encrypted ? "overlay.luks" : "overlay.qcow2"; }

void create_overlay(const OverlayTools& tools, const std::string& dir, const BaseImage& base,
                    const DiskKey* key, uid_t uid, gid_t gid) {
  const std::string overlay = (fs::path(dir) / overlay_name(key != nullptr)).string();
  const std::string head = (fs::path(dir) / "overlay-head.qcow2").string();
  const std::string size = std::to_string(base.virtual_size);
  // -u: the base is not opened by name (QEMU gets it as a descriptor); the
  // header names it for a reader's benefit only.
  const auto qcow2_on_base = [&](const std::string& file) {
    run_or_throw(
        {tools.qemu_img, "create", "-q", "-f", "qcow2", "-u", "-b", base.path, "-F", base.format, file, size},
        "qemu-img create");
  };
  try {
    if (!key) {
      qcow2_on_base(overlay);
    } else {
      {
        net::UniqueFd f(::open(overlay.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (!f) throw std::runtime_error("cannot create " + overlay + ": " + errno_text());
        if (::ftruncate(f.get(), static_cast<off_t>(container_bytes(base.virtual_size))) != 0)
          throw std::runtime_error("cannot size " + overlay + ": " + errno_text());
      }
      // LUKS1 (what QEMU's luks driver reads), AES-256-XTS; the passphrase
      // on stdin. 1000 PBKDF2 iterations, LUKS1's floor: the passphrase is
      // 256 random bits, no password to stretch.
      run_or_throw({tools.cryptsetup, "luksFormat", "--batch-mode", "--type", "luks1", "--cipher",
                    "aes-xts-plain64", "--key-size", "512", "--hash", "sha256", "--pbkdf-force-iterations",
                    "1000", "--key-file=-", overlay},
                   "cryptsetup luksFormat", key->text());
      // The qcow2 image goes inside, written through QEMU's luks driver
      // with the key read from a pipe.
      qcow2_on_base(head);
      const net::UniqueFd secret(key_pipe(key->text(), 0, 0));
      run_or_throw({tools.qemu_img, "convert", "-n", "-f", "raw", head, "--object",
                    "secret,id=zn-disk-key,file=/proc/self/fd/3", "--target-image-opts",
                    "driver=luks,key-secret=zn-disk-key,file.filename=" + opt_value(overlay)},
                   "qemu-img convert", "", secret.get());
      fs::remove(head);
    }
    hand_to(overlay, uid, gid);
  } catch (...) {
    std::error_code ignored;
    fs::remove(head, ignored);
    fs::remove(overlay, ignored);
    throw;
  }
}

}  // namespace zn::vmm
