// The BPF filesystem where the datapath pins its programs and maps.
#pragma once

#include <string>

namespace zn::dp {

inline constexpr const char* kDefaultPinRoot = "/sys/fs/bpf/zeroness";

// Makes sure the parent of pin_root is a bpffs (mounting one there if needed,
// e.g. inside a fresh mount namespace) and that pin_root exists, mode 0700.
void ensure_pin_root(const std::string& pin_root);

// Removes pin_root and the pins in it. Pinned objects that are still in use
// (a program attached to a TAP) stay alive; only their names go away.
void remove_pin_root(const std::string& pin_root);

bool is_bpffs(const std::string& path);

}  // namespace zn::dp
