// When a test may be skipped. On these machines every test can run as root;
// the only acceptable skip as root is a kernel that truly lacks a feature,
// said with GTEST_SKIP() << ZN_KERNEL_LACKS("sockmap") << ": ...".
#pragma once

#include <string>
#include <string_view>

namespace zn::test {

inline constexpr std::string_view kKernelLacks = "kernel lacks ";

// Use as: GTEST_SKIP() << ZN_KERNEL_LACKS("feature") << "why it matters".
#define ZN_KERNEL_LACKS(feature) (std::string(::zn::test::kKernelLacks) + (feature) + ": ")

inline bool skip_is_allowed(std::string_view message, bool as_root) {
  if (!as_root) return true;  // root-only tests skip for a non-root developer
  return message.starts_with(kKernelLacks);
}

}  // namespace zn::test
