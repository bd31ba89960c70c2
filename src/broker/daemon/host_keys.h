// The host key file zerod seals resource values under (secrets/host_key.h),
// and its rotation. A rotation makes the next key beside the current one
// (<path>.next), reseals the state under it (the registry's new snapshot is
// the commit point), then renames it over <path>. A crash at any step leaves
// a state one of the two files opens, and the next start finishes the
// rotation (pending()).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "broker/secrets/host_key.h"

namespace zn::broker {

class HostKeys {
 public:
  // The key at path. When there is no file there: made if `state_sealed`
  // is false (nothing is sealed under any key yet), else a refusal naming
  // the path (never an empty store). A rotation's next key a crash left
  // beside it is loaded too (pending()). Throws std::runtime_error.
  HostKeys(std::string path, bool state_sealed);

  std::shared_ptr<const HostKey> current() const;
  // The next key of an interrupted rotation; null when there is none.
  std::shared_ptr<const HostKey> pending() const;

  // Step 1 of a rotation: the next key, written to <path>.next (or the one
  // already there from an interrupted rotation).
  std::shared_ptr<const HostKey> begin_rotation();
  // Step 3, after the state is resealed under it: <path>.next renamed over
  // <path>, the directory fsync'ed; current() is the new key.
  void commit_rotation();

  const std::string& path() const { return path_; }
  std::string next_path() const { return path_ + ".next"; }

 private:
  std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const HostKey> current_, next_;
};

}  // namespace zn::broker
