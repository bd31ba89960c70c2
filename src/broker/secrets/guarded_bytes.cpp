#include "broker/secrets/guarded_bytes.h"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "broker/secrets/page_reprotector.h"

namespace zn::broker {
namespace {

std::atomic<long long> g_read_linger_ms{0};

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
  // Out of the sweeper's hands first (it holds its lock while it looks at
  // any of us); no reader can be left (they hold a reference to us).
  bool watched = false;
  {
    std::lock_guard lock(mu_);
    watched = watched_;
  }
  if (watched) PageReprotector::instance().forget(this);
  // sodium_free makes the pages writable itself, wipes, checks the canary
  // and unmaps.
  sodium_free(data_);
}

void GuardedBytes::protect_idle() const { must_protect(data_); }

void GuardedBytes::set_read_linger(std::chrono::milliseconds linger) {
  const long long ms = std::clamp<long long>(linger.count(), 0, 10'000);
  g_read_linger_ms.store(ms, std::memory_order_relaxed);
}

std::chrono::milliseconds GuardedBytes::read_linger() {
  return std::chrono::milliseconds(g_read_linger_ms.load(std::memory_order_relaxed));
}

bool GuardedBytes::readable_for_tests() const {
  std::lock_guard lock(mu_);
  return readable_;
}

void GuardedBytes::begin_read() const {
  std::lock_guard lock(mu_);
  if (!readable_) {
    if (sodium_mprotect_readonly(data_) != 0)
      throw std::runtime_error(std::string("libsodium: sodium_mprotect_readonly failed: ") +
                               std::strerror(errno));
    readable_ = true;
  }
  ++readers_;
}

void GuardedBytes::end_read() const {
  const std::chrono::milliseconds linger = read_linger();
  {
    std::lock_guard lock(mu_);
    if (--readers_ > 0) return;
    if (linger.count() == 0) {
      protect_idle();
      readable_ = false;
      return;
    }
    last_read_ = std::chrono::steady_clock::now();
    if (watched_) return;
    watched_ = true;
  }
  // Outside mu_: the sweeper takes its own lock, then ours.
  PageReprotector::instance().watch(this);
}

bool GuardedBytes::expire(std::chrono::steady_clock::time_point now, std::chrono::milliseconds linger) const {
  std::lock_guard lock(mu_);
  if (readable_ && readers_ == 0 && now - last_read_ >= linger) {
    protect_idle();
    readable_ = false;
  }
  if (readable_) return false;
  watched_ = false;
  return true;
}

}  // namespace zn::broker
