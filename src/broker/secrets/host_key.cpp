#include "broker/secrets/host_key.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace zn::broker {
namespace {

// Every message names the file and the problem; none carries key bytes.
[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("host key " + path + ": " + what);
}

std::string errno_text() { return std::strerror(errno); }

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// Closes on every path out, including a throw.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // close(2) reports a failed write-back on some filesystems: checked.
  int close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

std::string key_id(const GuardedBytes& key) {
  std::array<unsigned char, crypto_generichash_BYTES> hash{};
  key.with_bytes([&](std::span<const unsigned char> b) {
    crypto_generichash(hash.data(), hash.size(), b.data(), b.size(), nullptr, 0);
  });
  constexpr std::size_t kIdBytes = 8;
  char hex[kIdBytes * 2 + 1];
  sodium_bin2hex(hex, sizeof(hex), hash.data(), kIdBytes);
  return hex;
}

void fsync_directory(const std::string& path, const std::filesystem::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) fail(path, "fsync of " + dir.string() + ": " + errno_text());
}

}  // namespace

static_assert(HostKey::kSize == crypto_aead_xchacha20poly1305_ietf_KEYBYTES);

HostKey::HostKey(std::shared_ptr<const GuardedBytes> bytes)
    : bytes_(std::move(bytes)), id_(key_id(*bytes_)) {}

HostKey HostKey::generate() {
  return HostKey(std::make_shared<const GuardedBytes>(kSize, GuardedBytes::Random{}));
}

HostKey HostKey::load(const std::string& path) {
  // O_NOFOLLOW: a symlink could point the daemon at a key someone else
  // controls. O_NONBLOCK: a FIFO planted at the path must not hang startup.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT)
      fail(path,
           "missing; the sealed state cannot be opened without it (refusing to start with an empty store)");
    if (errno == ELOOP) fail(path, "is a symbolic link; the key must be a regular file");
    fail(path, "open: " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail(path, "stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  if (st.st_uid != ::geteuid())
    fail(path, "owned by uid " + std::to_string(st.st_uid) + ", not by this process's uid " +
                   std::to_string(::geteuid()));
  if ((st.st_mode & 077) != 0)
    fail(path, "mode " + octal_mode(st.st_mode) + " lets group or others at it; it must be 0600");
  if (static_cast<std::size_t>(st.st_size) != kSize)
    fail(path, "is " + std::to_string(st.st_size) + " bytes; a host key is " + std::to_string(kSize));

  // Read straight into guarded pages: the key is never in ordinary memory.
  auto bytes =
      std::make_shared<const GuardedBytes>(kSize, GuardedBytes::Fill{}, [&](std::span<unsigned char> out) {
        std::size_t got = 0;
        while (got < out.size()) {
          ssize_t n = ::pread(fd.get(), out.data() + got, out.size() - got, static_cast<off_t>(got));
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) fail(path, "read: " + errno_text());
          if (n == 0) fail(path, "shorter than " + std::to_string(kSize) + " bytes (changed while read?)");
          got += static_cast<std::size_t>(n);
        }
      });
  return HostKey(std::move(bytes));
}

bool HostKey::write_new(const std::string& path) const {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(path, "create " + dir.string() + ": " + ec.message());

  // Written whole under a temporary name, then link()ed to the real one:
  // link never replaces an existing file (a key is never overwritten: that
  // would lose every value sealed under it), and a crash mid-write leaves
  // only the temporary file, never a short key the next start would refuse.
  std::string tmp = path + ".new-XXXXXX";
  Fd fd(::mkstemp(tmp.data()));  // 0600, O_EXCL
  if (fd.get() < 0) fail(path, "create " + tmp + ": " + errno_text());
  std::string problem;
  // The umask can only narrow 0600, but a umask of 0177 or wider would leave
  // the owner unable to read it back: set it exactly.
  if (::fchmod(fd.get(), 0600) != 0) problem = "chmod: " + errno_text();
  if (problem.empty()) {
    bytes_->with_bytes([&](std::span<const unsigned char> b) {
      std::size_t put = 0;
      while (put < b.size()) {
        ssize_t n = ::write(fd.get(), b.data() + put, b.size() - put);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          problem = "write: " + errno_text();
          return;
        }
        put += static_cast<std::size_t>(n);
      }
    });
  }
  if (problem.empty() && ::fsync(fd.get()) != 0) problem = "fsync: " + errno_text();
  if (fd.close() != 0 && problem.empty()) problem = "close: " + errno_text();
  bool exists = false;
  if (problem.empty() && ::link(tmp.c_str(), path.c_str()) != 0) {
    if (errno == EEXIST)
      exists = true;
    else
      problem = "link: " + errno_text();
  }
  ::unlink(tmp.c_str());
  if (!problem.empty()) fail(path, problem);
  if (exists) return false;
  // The name must survive a crash too, or the next start makes another key.
  fsync_directory(path, dir);
  return true;
}

HostKey HostKey::create(const std::string& path) {
  HostKey key = generate();
  if (!key.write_new(path)) fail(path, "already exists; a host key is never overwritten");
  return key;
}

void HostKey::replace(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) fail(to, "rename from " + from + ": " + errno_text());
  std::filesystem::path dir = std::filesystem::path(to).parent_path();
  if (dir.empty()) dir = ".";
  fsync_directory(to, dir);
}

HostKey HostKey::load_or_create(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    HostKey key = generate();
    if (key.write_new(path)) return key;
    // Another process made it between our lstat and our create: use theirs.
  }
  return load(path);
}

}  // namespace zn::broker
