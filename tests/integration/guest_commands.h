// Running commands inside lab namespaces and sending raw frames from a guest.
#pragma once

#include <string>

#include "support/packet_builder.h"

namespace zn::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `sh -c command` inside network namespace ns (ip netns exec).
CommandResult run_in_netns(const std::string& ns, const std::string& command);

// Sends one Ethernet frame out of interface ifname of namespace ns through
// an AF_PACKET socket: exactly the bytes a guest kernel could put on its NIC.
void send_frame_from(const std::string& ns, const std::string& ifname, const Bytes& frame);

}  // namespace zn::test
