#include "broker/daemon/host_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace zn::broker {
namespace {

bool exists_no_follow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

HostKeys::HostKeys(std::string path, bool state_sealed) : path_(std::move(path)) {
  if (!exists_no_follow(path_) && state_sealed)
    throw std::runtime_error("host key " + path_ +
                             ": missing, and the state holds values sealed under a key; restore the key "
                             "file (zerod will not start with an empty store)");
  current_ = std::make_shared<const HostKey>(HostKey::load_or_create(path_));
  if (exists_no_follow(next_path())) next_ = std::make_shared<const HostKey>(HostKey::load(next_path()));
}

std::shared_ptr<const HostKey> HostKeys::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::shared_ptr<const HostKey> HostKeys::pending() const {
  std::lock_guard lock(mu_);
  return next_;
}

std::shared_ptr<const HostKey> HostKeys::begin_rotation() {
  std::lock_guard lock(mu_);
  if (!next_) next_ = std::make_shared<const HostKey>(HostKey::create(next_path()));
  return next_;
}

void HostKeys::commit_rotation() {
  std::lock_guard lock(mu_);
  if (!next_) throw std::logic_error("commit_rotation without begin_rotation");
  if (::rename(next_path().c_str(), path_.c_str()) != 0)
    throw std::runtime_error("host key " + path_ + ": rename from " + next_path() + ": " +
                             std::strerror(errno));
  current_ = std::move(next_);  // on disk now, whatever the fsync says
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced)
    throw std::runtime_error("host key " + path_ + ": fsync of its directory: " + std::strerror(errno));
}

}  // namespace zn::broker
