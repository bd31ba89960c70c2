#include "broker/resources/blob_store.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "broker/resources/store_io.h"
#include "userspace/net/unique_fd.h"

namespace zn::broker {

namespace {

constexpr std::string_view kTempPrefix = ".zn-tmp-";
constexpr size_t kMaxSegmentBytes = 255;  // NAME_MAX

// openat2 beneath dirfd, refusing every symlink on the way (and magic links).
int open_beneath(int dirfd, const std::string& path, uint64_t flags, uint64_t mode = 0) {
  struct open_how how {};
  how.flags = flags;
  how.mode = mode;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
}

StoreFailure from_errno(int err, const char* step) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return store_fail(StoreError::kNotFound, "no such object");
    case ELOOP:
    case EXDEV:
      return store_fail(StoreError::kForbidden, "the path crosses a symbolic link or leaves the directory");
    case EACCES:
    case EPERM:
      return store_fail(StoreError::kForbidden, "permission denied");
    case ENOSPC:
    case EDQUOT:
      return store_fail(StoreError::kQuotaExceeded, "the disk is full");
    case ENOSYS:
      return store_fail(StoreError::kInternal, "kernel lacks openat2 (Linux 5.6)");
    default:
      return store_fail(StoreError::kInternal,
                        std::string("blob store: ") + step + ": " + std::strerror(err));
  }
}

std::vector<std::string> segments(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t slash = path.find('/', start);
    out.emplace_back(
        path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

// Empty when the kernel has no randomness to give (never in practice): the
// data path returns kInternal rather than throwing.
std::string temp_name() {
  unsigned char r[8];
  if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name(kTempPrefix);
  for (unsigned char b : r) {
    name += kHex[b >> 4];
    name += kHex[b & 15];
  }
  return name;
}

}  // namespace

BlobStore::BlobStore(BlobStoreOptions options) : options_(std::move(options)) {
  dirfd_ = ::open(options_.directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd_ < 0)
    throw std::runtime_error("blob store: cannot open " + options_.directory + ": " + std::strerror(errno));
  net::UniqueFd probe(open_beneath(dirfd_, ".", O_PATH | O_CLOEXEC));
  if (probe.get() < 0) {
    const int err = errno;
    ::close(dirfd_);
    if (err == ENOSYS)
      throw std::runtime_error("blob store: kernel lacks openat2 (Linux 5.6); refusing to serve blobs");
    throw std::runtime_error("blob store: openat2 on " + options_.directory + ": " + std::strerror(err));
  }
  // The quota's starting point: regular files' bytes, symlinks not followed.
  std::error_code ec;
  namespace fs = std::filesystem;
  for (fs::recursive_directory_iterator it(options_.directory, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_regular_file(st)) used_ += it->file_size(ec);
    if (fs::is_regular_file(st) || fs::is_directory(st)) ++objects_;
  }
  if (ec) {
    ::close(dirfd_);
    throw std::runtime_error("blob store: cannot size " + options_.directory + ": " + ec.message());
  }
}

BlobStore::~BlobStore() {
  if (dirfd_ >= 0) ::close(dirfd_);
}

uint64_t BlobStore::used_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

uint64_t BlobStore::used_objects() const {
  std::lock_guard lock(mutex_);
  return objects_;
}

std::optional<std::string> BlobStore::malformed(std::string_view path, size_t max_bytes) {
  if (path.empty()) return "empty path";
  if (path.size() > max_bytes) return "path longer than " + std::to_string(max_bytes) + " bytes";
  if (path.find('\0') != std::string_view::npos) return "NUL in the path";
  if (path.front() == '/') return "absolute path";
  for (const std::string& s : segments(path)) {
    if (s.empty()) return "empty path segment";
    if (s == "." || s == "..") return "a . or .. segment";
    if (s.size() > kMaxSegmentBytes) return "a path segment longer than 255 bytes";
    if (s.starts_with(kTempPrefix)) return "a reserved name";
  }
  return std::nullopt;
}

StoreResult<std::string> BlobStore::get(std::string_view path) {
  if (auto why = malformed(path, options_.max_path_bytes)) return store_fail(StoreError::kBadRequest, *why);
  // O_NONBLOCK: a FIFO placed in the directory must not hang the call.
  net::UniqueFd fd(
      open_beneath(dirfd_, std::string(path), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) return from_errno(errno, "open");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return from_errno(errno, "fstat");
  if (!S_ISREG(st.st_mode)) return store_fail(StoreError::kNotFound, "no such object");
  if (static_cast<uint64_t>(st.st_size) > options_.max_object_bytes)
    return store_fail(StoreError::kTooLarge,
                      "object above the limit (" + std::to_string(options_.max_object_bytes) + " bytes)");
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + got, out.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return from_errno(errno, "read");
    }
    if (n == 0) break;  // shrank meanwhile
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

StoreFailure BlobStore::objects_quota() const {
  return store_fail(StoreError::kQuotaExceeded, "object quota (" + std::to_string(options_.max_objects) +
                                                    " files and directories) reached");
}

StoreStatus BlobStore::put(std::string_view path, std::string_view bytes) {
  if (options_.mode == AccessMode::kReadOnly)
    return store_fail(StoreError::kReadOnly, "read-only capability");
  if (auto why = malformed(path, options_.max_path_bytes)) return store_fail(StoreError::kBadRequest, *why);
  if (bytes.size() > options_.max_object_bytes)
    return store_fail(StoreError::kTooLarge,
                      "object above the limit (" + std::to_string(options_.max_object_bytes) + " bytes)");
  std::lock_guard lock(mutex_);

  // The parent directory, made as needed, one segment at a time.
  const std::vector<std::string> parts = segments(path);
  net::UniqueFd parent;
  int at = dirfd_;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    // No O_NOFOLLOW: with O_DIRECTORY it turns a symlink into ENOTDIR;
    // RESOLVE_NO_SYMLINKS refuses it as ELOOP, which says what it is.
    const uint64_t flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    int fd = open_beneath(at, parts[i], flags);
    if (fd < 0 && errno == ENOENT) {
      if (objects_ + 1 > options_.max_objects) return objects_quota();
      if (::mkdirat(at, parts[i].c_str(), 0750) == 0)
        ++objects_;
      else if (errno != EEXIST)
        return from_errno(errno, "mkdir");
      fd = open_beneath(at, parts[i], flags);
    }
    if (fd < 0) {
      if (errno == ENOTDIR)
        return store_fail(StoreError::kBadRequest, "a path segment is an object, not a directory");
      return from_errno(errno, "open directory");
    }
    net::UniqueFd next(fd);
    std::swap(parent, next);
    at = parent.get();
  }
  const std::string& name = parts.back();

  // What the object replaces, for the quota. `at` was opened beneath the
  // directory and name is one segment, so a plain lstat-style look is safe.
  uint64_t old = 0;
  bool exists = false;
  struct stat st {};
  if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(st.st_mode)) return from_errno(ELOOP, "stat");
    if (!S_ISREG(st.st_mode))
      return store_fail(StoreError::kBadRequest, "a directory or special file is at that path");
    old = static_cast<uint64_t>(st.st_size);
    exists = true;
  } else if (errno != ENOENT) {
    return from_errno(errno, "stat");
  }
  if (!exists && objects_ + 1 > options_.max_objects) return objects_quota();
  const uint64_t others = used_ >= old ? used_ - old : 0;  // the operator may have shrunk a file meanwhile
  if (others + bytes.size() > options_.quota_bytes)
    return store_fail(StoreError::kQuotaExceeded,
                      "byte quota (" + std::to_string(options_.quota_bytes) + " bytes) reached");

  const std::string tmp = temp_name();
  if (tmp.empty()) return store_fail(StoreError::kInternal, "blob store: getrandom failed");
  {
    net::UniqueFd out(open_beneath(at, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640));
    if (out.get() < 0) return from_errno(errno, "create");
    if (!write_all(out.get(), bytes) || ::fsync(out.get()) != 0) {
      const int err = errno;
      ::unlinkat(at, tmp.c_str(), 0);
      return from_errno(err, "write");
    }
  }
  if (::renameat(at, tmp.c_str(), at, name.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(at, tmp.c_str(), 0);
    return from_errno(err, "rename");
  }
  ::fsync(at);  // the rename itself; the object is in place either way
  used_ = others + bytes.size();
  if (!exists) ++objects_;
  return Done{};
}

}  // namespace zn::broker
