// Named network namespaces (/run/netns/NAME) and running programs in them.
// These shell out to iproute2 on purpose: `ip netns add` sets up the bind
// mounts other tools (ip netns exec, zerod) expect.
#pragma once

#include <string>
#include <vector>

namespace zn::vmm {

// Runs argv[0] (PATH lookup) with argv and waits. Returns the exit code, or
// 128+signal if it was killed. Throws std::system_error if it cannot start.
int run_command(const std::vector<std::string>& argv);

// `ip netns add NAME`; throws std::runtime_error on failure (e.g. it exists).
void create_netns(const std::string& name);
// `ip netns del NAME` if it exists; throws if it exists and cannot be deleted.
void delete_netns(const std::string& name);
// Names under /run/netns.
std::vector<std::string> list_netns();

// `ip netns exec NETNS argv...`; returns run_command's result.
int run_in_netns(const std::string& netns, const std::vector<std::string>& argv);

}  // namespace zn::vmm
