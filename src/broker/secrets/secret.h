// One secret value (a token, a password): bytes in guarded pages that no
// formatting path can print. operator<<, fmt (and so spdlog) and nlohmann's
// to_json all write "<redacted>"; there is no conversion to a string and no
// from_json, so a value gets in only through Secret(std::string_view) and
// out only through reveal().
//
// A value type: copies share one immutable GuardedBytes, so passing a Secret
// around copies a pointer, never the value.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string_view>
#include <utility>

#include "broker/secrets/guarded_bytes.h"

namespace zn::broker {

class Secret {
 public:
  static constexpr std::string_view kRedacted = "<redacted>";

  // The empty value (size 0).
  Secret();
  // Copies value into guarded pages; the caller's copy is the caller's to
  // wipe (see GuardedBytes). Explicit on purpose: making a Secret is a
  // decision, never a conversion.
  explicit Secret(std::string_view value);
  // Adopts bytes already in guarded pages (a decrypted or generated value).
  explicit Secret(std::shared_ptr<const GuardedBytes> bytes);

  // Calls f(std::string_view) with the value and returns what f returns. The
  // view is valid only during the call: write it where it goes (a header
  // being sent, a sealer) and do not keep it. Any thread.
  template <class F>
  decltype(auto) reveal(F&& f) const {
    return bytes_->with_bytes([&](std::span<const unsigned char> b) -> decltype(auto) {
      return std::forward<F>(f)(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
    });
  }

  std::size_t size() const { return bytes_->size(); }
  bool empty() const { return size() == 0; }

  // Whether the value is `candidate`, in time independent of where they
  // differ (sodium_memcmp); only the length comparison is early.
  bool equals(std::string_view candidate) const;

 private:
  std::shared_ptr<const GuardedBytes> bytes_;  // never null
};

std::ostream& operator<<(std::ostream& os, const Secret&);
// Writes the string "<redacted>". There is deliberately no from_json.
void to_json(nlohmann::json& j, const Secret&);

}  // namespace zn::broker

// fmt (and spdlog, which uses this fmt) prints a Secret as "<redacted>",
// honouring width and alignment like any string.
template <>
struct fmt::formatter<zn::broker::Secret> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const zn::broker::Secret&, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(zn::broker::Secret::kRedacted, ctx);
  }
};
