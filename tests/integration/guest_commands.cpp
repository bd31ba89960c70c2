#include "integration/guest_commands.h"

#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "common/netns.h"
#include "support/host_sockets.h"

namespace zn::test {

CommandResult run_in_netns(const std::string& ns, const std::string& command) {
  std::string quoted = "'";
  for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  const std::string full = "ip netns exec " + ns + " sh -c " + quoted + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) throw std::system_error(errno, std::generic_category(), "popen");
  CommandResult result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

void send_frame_from(const std::string& ns, const std::string& ifname, const Bytes& frame) {
  NetnsScope in_ns(ns);
  Fd fd(::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::system_error(errno, std::generic_category(), "AF_PACKET socket");
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (addr.sll_ifindex == 0) throw std::runtime_error("no interface " + ifname + " in " + ns);
  addr.sll_halen = 6;
  std::copy(frame.begin(), frame.begin() + 6, addr.sll_addr);
  if (::sendto(fd.get(), frame.data(), frame.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) < 0)
    throw std::system_error(errno, std::generic_category(), "send frame");
}

}  // namespace zn::test
