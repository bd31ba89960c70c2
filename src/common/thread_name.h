// Names the calling thread (what top -H, perf and /proc/PID/task/*/comm
// show), so an operator, and the benchmark's CPU accounting, can tell
// zerod's threads apart: the proxy's loops from its workers, the audit
// writer from the exporters.
#pragma once

#include <string>

namespace zn {

// Linux keeps 15 bytes; a longer name is cut there. Never fails loudly: a
// name is a label, not a function.
void set_thread_name(const std::string& name) noexcept;

}  // namespace zn
