#include "broker/secrets/secret.h"

#include <sodium.h>

#include <nlohmann/json.hpp>
#include <ostream>

namespace zn::broker {
namespace {

// One shared empty value: default-constructed Secrets (in maps, in structs
// being filled) cost no pages of their own.
const std::shared_ptr<const GuardedBytes>& empty_bytes() {
  static const auto empty = std::make_shared<const GuardedBytes>(std::string_view());
  return empty;
}

}  // namespace

Secret::Secret() : bytes_(empty_bytes()) {}

Secret::Secret(std::string_view value) : bytes_(std::make_shared<const GuardedBytes>(value)) {}

Secret::Secret(std::shared_ptr<const GuardedBytes> bytes) : bytes_(std::move(bytes)) {
  if (!bytes_) bytes_ = empty_bytes();
}

bool Secret::equals(std::string_view candidate) const {
  if (candidate.size() != size()) return false;
  return bytes_->with_bytes([&](std::span<const unsigned char> b) {
    return sodium_memcmp(b.data(), candidate.data(), b.size()) == 0;
  });
}

std::ostream& operator<<(std::ostream& os, const Secret&) { return os << Secret::kRedacted; }

void to_json(nlohmann::json& j, const Secret&) { j = Secret::kRedacted; }

}  // namespace zn::broker
