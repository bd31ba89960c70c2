// A blob capability's backing store: one operator-named directory, objects
// by relative path (issue 13).
//
// Every path is resolved by the kernel beneath the directory: openat2 with
// RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS from a
// descriptor of the directory opened once, so no `..`, absolute path or
// symlink (to /etc, to a sibling, as an intermediate directory) can reach
// outside it, whatever is renamed meanwhile. Paths are also checked up front
// (relative, no empty, `.` or `..` segment, no NUL, bounded) so a guest gets
// kBadRequest for a malformed one; a symlink met on the way is kForbidden.
// A kernel without openat2 (before 5.6) is refused at open: no fallback.
//
// put writes a temporary file in the object's directory, fsyncs it, renames
// it over the object (atomic: a reader sees the old or the new bytes) and
// fsyncs the directory. Missing intermediate directories are made with
// mkdirat relative to descriptors opened the same way.
//
// The quota counts the bytes of regular files under the directory and the
// number of files and directories (so empty objects cannot exhaust inodes):
// a walk at open, then the store's own puts. Files the operator changes
// behind the store are seen at the next open.
//
// Threads: calls may block (disk); call off the proxy's loop, from any
// thread. puts are serialised (the quota), gets are not.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "broker/resources/store.h"

namespace zn::broker {

struct BlobStoreOptions {
  std::string directory;  // the operator's; must exist
  AccessMode mode = AccessMode::kReadOnly;
  uint64_t quota_bytes = 1024ull * 1024 * 1024;  // all regular files under the directory
  uint64_t max_objects = 100000;                 // files and directories under it
  size_t max_object_bytes = 64 * 1024 * 1024;
  size_t max_path_bytes = 1024;
};

class BlobStore {
 public:
  // Opens the directory and sums what it holds. Throws std::runtime_error
  // (setup), including when the kernel lacks openat2.
  explicit BlobStore(BlobStoreOptions options);
  ~BlobStore();
  BlobStore(const BlobStore&) = delete;
  BlobStore& operator=(const BlobStore&) = delete;

  StoreResult<std::string> get(std::string_view path);
  StoreStatus put(std::string_view path, std::string_view bytes);

  // What the quota counts now.
  uint64_t used_bytes() const;
  uint64_t used_objects() const;

  // Whether path is well-formed (kBadRequest's reason when not). Public for
  // the HTTP layer, which may refuse early.
  static std::optional<std::string> malformed(std::string_view path, size_t max_bytes);

 private:
  StoreFailure objects_quota() const;

  BlobStoreOptions options_;
  int dirfd_ = -1;
  mutable std::mutex mutex_;  // puts, and the quota
  uint64_t used_ = 0;
  uint64_t objects_ = 0;
};

}  // namespace zn::broker
