#include "broker/daemon/host_keys.h"

#include <sys/stat.h>

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
  try {
    HostKey::replace(next_path(), path_);
  } catch (...) {
    // Renamed but not synced: the new key is on disk and the state is
    // sealed under it, whatever the fsync said.
    if (!exists_no_follow(next_path())) current_ = std::move(next_);
    throw;
  }
  current_ = std::move(next_);
}

}  // namespace zn::broker
