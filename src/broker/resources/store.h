// What every backing store of a capability-scoped resource shares (issue 13):
// the access mode a capability was granted, the stable error codes the data
// path returns, and the result type carrying a value or one of them.
//
// The HTTP layer maps each code to a status and a stable JSON code
// (to_string), so a code is never renumbered or renamed, and a new one goes at
// the end. Messages say what was refused and which limit was hit; they never
// quote stored contents (a value, a row, a blob's bytes), because they reach
// the guest and the audit trail.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace zn::broker {

// Granted by the session's policy per capability, never by the guest.
enum class AccessMode { kReadOnly, kReadWrite };

enum class StoreError {
  kNotFound,       // no such key, object or message (also: a blob path through a missing directory)
  kReadOnly,       // a write through a read-only capability
  kQuotaExceeded,  // the capability's byte, key, row or message quota would be passed
  kTooLarge,       // one value, object or message above its maximum size
  kBadRequest,     // malformed input: a bad key or path, SQL that does not parse, a bad parameter
  kLimitExceeded,  // a per-request bound: time, VM steps, rows, result bytes (the message says which)
  kForbidden,      // refused in any mode: ATTACH, load_extension, a mutating PRAGMA, a symlink
  kInternal,       // the store itself failed (I/O, a corrupt file, busy); the message names the step
};

// The stable code for JSON errors: "not_found", "read_only", ...
std::string_view to_string(StoreError);

struct StoreFailure {
  StoreError code;
  std::string message;  // for people: what was refused and why, never stored contents
};

// A value or a failure; never both. [[nodiscard]]: a dropped error is a bug.
template <typename T>
class [[nodiscard]] StoreResult {
 public:
  StoreResult(T value) : v_(std::move(value)) {}  // implicit: return a value or store_fail(...)
  StoreResult(StoreFailure failure)
      : v_(std::move(failure)) {}  // implicit: return a value or store_fail(...)

  bool ok() const { return v_.index() == 0; }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const StoreFailure& failure() const { return std::get<1>(v_); }
  StoreError error() const { return failure().code; }
  const std::string& message() const { return failure().message; }

 private:
  std::variant<T, StoreFailure> v_;
};

// For operations that return nothing but success.
struct Done {};
using StoreStatus = StoreResult<Done>;

inline StoreFailure store_fail(StoreError code, std::string message) { return {code, std::move(message)}; }

}  // namespace zn::broker
