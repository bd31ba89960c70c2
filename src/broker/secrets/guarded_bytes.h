// Bytes that live in guarded pages (libsodium's sodium_malloc): a guard page
// on each side, a canary checked on free, locked out of swap and left out of
// core dumps (mlock, MADV_DONTDUMP), and kept PROT_NONE while nobody reads
// them, so a stray read or an overflow from a neighbouring buffer faults
// instead of reaching them. Freed with sodium_free, which wipes them.
//
// Reading is scoped (with_bytes): the pages are readable only for the
// duration of the call. Several threads may read at once: the first reader
// makes the pages readable and the last one makes them no-access again, so a
// reader never has the pages revoked under it.
//
// Each instance costs whole pages (the data rounded up, a header page and
// two guard pages: four mappings, ~12 us to make and free) and each read two
// mprotect calls (~1 us): this is for keys and credentials made once and
// read per use, not for bulk data or per-request values.
//
// With a read linger (set_read_linger, zerod's secret_read_linger_ms), the
// last reader leaves the pages readable and a sweeper thread makes them
// no-access once nobody has read them for that long (between one and one
// and a half lingers): a credential injected into every request of a busy
// session costs one mprotect pair per burst, not per request (~4 % of the
// proxy's CPU, measured). Guard pages, canary, mlock and the dump exclusion
// are the same either way.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <span>
#include <string_view>

namespace zn::broker {

class GuardedBytes {
 public:
  struct Random {};  // tag: n random bytes, for keys
  struct Fill {};    // tag: n bytes written by a callback, see below

  // Copies `bytes` into guarded pages. The caller's copy (a parsed JSON
  // string, a read buffer) stays the caller's to wipe or drop: this cannot
  // reach it. Throws std::runtime_error if libsodium cannot start or the
  // allocation fails.
  explicit GuardedBytes(std::string_view bytes);

  // n bytes from randombytes_buf (the kernel's CSPRNG).
  GuardedBytes(std::size_t n, Random);

  // n bytes written by fill(std::span<unsigned char>) while the pages are
  // writable, so a key read from a file or a decrypted value goes straight
  // into guarded memory with no copy anywhere else. If fill throws, the
  // pages are wiped and freed and the exception propagates.
  template <class F>
  GuardedBytes(std::size_t n, Fill, F&& fill) : GuardedBytes(n) {
    fill(std::span<unsigned char>(data_, size_));
    protect_idle();
  }

  // Wipes and frees (sodium_free; aborts if the canary was overwritten).
  ~GuardedBytes();

  // Non-copyable, non-movable: the mutex and the reader count belong to the
  // pages. Share one with std::shared_ptr<const GuardedBytes>.
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;

  std::size_t size() const { return size_; }

  // Calls f(std::span<const unsigned char>) with the pages readable and
  // returns what f returns. The span is valid only during the call: do not
  // keep it, and do not copy the bytes anywhere that outlives it unless that
  // copy is wiped. Any thread; blocks only on the mprotect of another reader
  // starting or ending (microseconds).
  template <class F>
  decltype(auto) with_bytes(F&& f) const {
    ReadAccess access(*this);
    return f(std::span<const unsigned char>(data_, size_));
  }

  // The address of the bytes, for tests that check the pages are no-access
  // when idle. Reading through it outside with_bytes crashes (SIGSEGV).
  const unsigned char* address_for_tests() const { return data_; }
  // Whether the pages are readable right now (a reader, or lingering).
  bool readable_for_tests() const;

  // How long pages stay readable after their last reader, for every
  // instance from their next read on; 0 (the default): no-access at once.
  // Process-wide; at most 10 s.
  static void set_read_linger(std::chrono::milliseconds linger);
  static std::chrono::milliseconds read_linger();

 private:
  // Allocates n writable bytes (at least one page's worth of guard) and
  // leaves them readable-writable for the constructor to fill.
  explicit GuardedBytes(std::size_t n);
  void protect_idle() const;  // PROT_NONE
  void begin_read() const;
  void end_read() const;
  // For the sweeper: no-access if nobody has read the pages for `linger`
  // by `now`. True once they are no-access (the sweeper forgets them).
  friend class PageReprotector;
  bool expire(std::chrono::steady_clock::time_point now, std::chrono::milliseconds linger) const;

  // RAII around one read: makes the pages readable if it is the first
  // reader, no-access again if it is the last; exception-safe.
  class ReadAccess {
   public:
    explicit ReadAccess(const GuardedBytes& b) : b_(b) { b_.begin_read(); }
    ~ReadAccess() { b_.end_read(); }
    ReadAccess(const ReadAccess&) = delete;
    ReadAccess& operator=(const ReadAccess&) = delete;

   private:
    const GuardedBytes& b_;
  };

  unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
  // Readers in with_bytes right now; the protection changes only under mu_:
  // readable while readers_ > 0, and after that while lingering.
  mutable std::mutex mu_;
  mutable std::size_t readers_ = 0;
  mutable bool readable_ = false;
  mutable bool watched_ = false;  // handed to the sweeper, not yet expired
  mutable std::chrono::steady_clock::time_point last_read_{};
};

}  // namespace zn::broker
