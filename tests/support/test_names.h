// Unique names and self-removing namespaces, so tests run twice in a row,
// in parallel and after a crash.
#pragma once

#include <unistd.h>

#include <random>
#include <string>

#include "common/netns.h"
#include "vmm/host/named_netns.h"

namespace zn::vmm::testing {

// "znt<pid><4 hex>": a valid Lab prefix, short enough for netns names.
inline std::string unique_prefix() {
  static std::mt19937 rng{std::random_device{}()};
  char tail[8];
  std::snprintf(tail, sizeof tail, "%04x", static_cast<unsigned>(rng() & 0xffff));
  return "znt" + std::to_string(::getpid()) + tail;
}

// A named network namespace removed on destruction, even when a test fails.
class TestNetns {
 public:
  explicit TestNetns(const std::string& suffix) : name_(unique_prefix() + "-" + suffix) {
    create_netns(name_);
  }
  ~TestNetns() {
    try {
      delete_netns(name_);
    } catch (...) {
    }
  }
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

inline bool root() { return ::geteuid() == 0; }

}  // namespace zn::vmm::testing

#define ZN_REQUIRE_ROOT() \
  if (!::zn::vmm::testing::root()) GTEST_SKIP() << "needs root"
