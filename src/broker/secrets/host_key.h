// The host key: 32 random bytes in a file only root can read, made on the
// first start, that everything zerod keeps at rest is sealed under (see
// sealer.h). Copying the state directory without it reveals nothing; losing
// it loses the sealed values, and zerod refuses to start rather than come up
// with an empty store.
//
// In memory the key lives in guarded pages. Its id, the first 8 bytes of
// BLAKE2b of the key in hex, is public: sealed values carry it, so a value
// sealed under another key is named as such, not as corruption.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "broker/secrets/guarded_bytes.h"

namespace zn::broker {

class HostKey {
 public:
  static constexpr std::size_t kSize = 32;  // crypto_aead_xchacha20poly1305_ietf_KEYBYTES

  // Loads the key at path. Throws std::runtime_error naming the path and
  // what is wrong (never any key bytes) if it is missing, a symlink, not a
  // regular file, not owned by the effective uid, readable or writable by
  // group or others, or not exactly kSize bytes.
  static HostKey load(const std::string& path);

  // Makes a new key and writes it to path: written whole to a temporary
  // file (mode 0600, fsync), link()ed into place (never over anything, a
  // symlink included), then the directory fsync'ed; the directory is created
  // if missing. Throws if path exists or cannot be written; a crash leaves
  // no key or a whole one, never a short one. For the first start and for rotation (make the new key
  // beside the old one, reseal, then swap).
  static HostKey create(const std::string& path);

  // load(path), or create(path) when there is no file at path. Any other
  // problem with an existing file is a refusal, as in load().
  static HostKey load_or_create(const std::string& path);

  // A key that exists only in memory (tests, and a rotation's new key
  // before it is written).
  static HostKey generate();

  // Rotation's last step: the key file at `from` (written by create())
  // renamed over `to`, then the directory fsync'ed so the new name survives
  // a crash. Throws std::runtime_error naming the paths.
  static void replace(const std::string& from, const std::string& to);

  // 16 lowercase hex characters: BLAKE2b(key)[0..8). Public.
  const std::string& id() const { return id_; }

  // Calls f(std::span<const unsigned char>) with the key bytes, readable for
  // the call only (GuardedBytes::with_bytes). For the sealer; any thread.
  template <class F>
  decltype(auto) with_key(F&& f) const {
    return bytes_->with_bytes(std::forward<F>(f));
  }

 private:
  explicit HostKey(std::shared_ptr<const GuardedBytes> bytes);
  // Writes the key to a new file at path; false if something is already
  // there (nothing is touched then). Throws on any other failure.
  bool write_new(const std::string& path) const;

  std::shared_ptr<const GuardedBytes> bytes_;
  std::string id_;
};

}  // namespace zn::broker
