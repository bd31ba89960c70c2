#include "broker/secrets/guarded_bytes.h"

#include <sodium.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace zn::broker {
namespace {

// sodium_init once per process; it is thread-safe and idempotent, but a
// function-local static also gives the first failure one clear message.
void ensure_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw std::runtime_error("libsodium: sodium_init failed (no entropy source?)");
}

// Making the pages no-access again fails only when the kernel refuses
// (ENOMEM at the mapping limit). Carrying on would leave a secret readable,
// and this runs where nothing can be thrown, so it ends the process.
void must_protect(unsigned char* p) {
  if (sodium_mprotect_noaccess(p) != 0) {
    std::fprintf(stderr, "zn secrets: sodium_mprotect_noaccess failed: %s\n", std::strerror(errno));
    std::abort();
  }
}

}  // namespace

GuardedBytes::GuardedBytes(std::size_t n) : size_(n) {
  ensure_sodium();
  // sodium_malloc(0) returns the first byte of the trailing guard page; one
  // byte keeps an empty value's pointer inside its own pages.
  data_ = static_cast<unsigned char*>(sodium_malloc(std::max<std::size_t>(n, 1)));
  if (data_ == nullptr)
    throw std::runtime_error("libsodium: sodium_malloc failed (out of memory or mappings)");
}

GuardedBytes::GuardedBytes(std::string_view bytes) : GuardedBytes(bytes.size()) {
  if (!bytes.empty()) std::memcpy(data_, bytes.data(), bytes.size());
  protect_idle();
}

GuardedBytes::GuardedBytes(std::size_t n, Random) : GuardedBytes(n) {
  randombytes_buf(data_, n);
  protect_idle();
}

GuardedBytes::~GuardedBytes() {
  // sodium_free makes the pages writable itself, wipes, checks the canary
  // and unmaps; no reader can be left (they hold a reference to us).
  sodium_free(data_);
}

void GuardedBytes::protect_idle() const { must_protect(data_); }

void GuardedBytes::begin_read() const {
  std::lock_guard lock(mu_);
  if (readers_ == 0 && sodium_mprotect_readonly(data_) != 0)
    throw std::runtime_error(std::string("libsodium: sodium_mprotect_readonly failed: ") +
                             std::strerror(errno));
  ++readers_;
}

void GuardedBytes::end_read() const {
  std::lock_guard lock(mu_);
  if (--readers_ == 0) protect_idle();
}

}  // namespace zn::broker
