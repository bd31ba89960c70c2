#include "vmm/host/tap_device.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "vmm/host/route_netlink.h"

namespace zn::vmm {
namespace {

net::UniqueFd tun_set_iff(const std::string& name, int extra_flags) {
  if (name.empty() || name.size() >= IFNAMSIZ)
    throw std::invalid_argument("bad TAP name '" + name + "' (1-15 characters)");
  net::UniqueFd fd(::open("/dev/net/tun", O_RDWR | O_CLOEXEC));
  if (!fd) throw std::system_error(errno, std::generic_category(), "open /dev/net/tun");
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.c_str(), name.size());
  ifr.ifr_flags = static_cast<short>(IFF_TAP | IFF_NO_PI | extra_flags);
  if (::ioctl(fd.get(), TUNSETIFF, &ifr) != 0)
    throw std::system_error(errno, std::generic_category(), "TUNSETIFF " + name);
  return fd;
}

}  // namespace

int create_tap(const std::string& name, const TapSettings& settings) {
  {
    // IFF_TUN_EXCL: fail on an existing device instead of silently attaching to it.
    net::UniqueFd fd = tun_set_iff(name, IFF_TUN_EXCL);
    if (::ioctl(fd.get(), TUNSETPERSIST, 1) != 0)
      throw std::system_error(errno, std::generic_category(), "TUNSETPERSIST " + name);
    // A persistent TAP without an owner is anyone's to attach while nobody
    // holds it (/dev/net/tun is usually 0666): a local user could then speak
    // as the session's guest. Root's alone, until a launcher hands it over.
    set_tap_owner(fd.get(), 0, 0);
  }  // closing our fd leaves the persistent device without carrier, as a VMM expects
  RouteNetlink nl;
  try {
    int ifindex = nl.link_index(name);
    // Before the link comes up, which is when the kernel makes its link-local.
    if (settings.mac) nl.use_eui64_link_local(ifindex);
    nl.configure_link(ifindex, {settings.mac, settings.mtu, settings.up});
    for (const auto& cidr : settings.addresses) nl.add_address(ifindex, cidr);
    return ifindex;
  } catch (...) {
    nl.delete_link(name);
    throw;
  }
}

bool delete_tap(const std::string& name) { return RouteNetlink().delete_link(name); }

net::UniqueFd open_tap(const std::string& name) {
  // TUNSETIFF creates a transient TAP when none exists: detect that (no
  // IFF_PERSIST) and let it vanish by closing, rather than attach to it.
  net::UniqueFd fd = tun_set_iff(name, 0);
  ifreq ifr{};
  if (::ioctl(fd.get(), TUNGETIFF, &ifr) != 0)
    throw std::system_error(errno, std::generic_category(), "TUNGETIFF " + name);
  if (!(ifr.ifr_flags & IFF_PERSIST))
    throw std::system_error(ENODEV, std::generic_category(), "no persistent TAP named " + name);
  return fd;
}

std::string tap_name(int tap_fd) {
  ifreq ifr{};
  if (::ioctl(tap_fd, TUNGETIFF, &ifr) != 0)
    throw std::system_error(errno, std::generic_category(), "TUNGETIFF");
  return std::string(ifr.ifr_name, ::strnlen(ifr.ifr_name, IFNAMSIZ));
}

void set_tap_owner(int tap_fd, uid_t owner, gid_t group) {
  if (::ioctl(tap_fd, TUNSETOWNER, static_cast<unsigned long>(owner)) != 0)
    throw std::system_error(errno, std::generic_category(), "TUNSETOWNER");
  if (::ioctl(tap_fd, TUNSETGROUP, static_cast<unsigned long>(group)) != 0)
    throw std::system_error(errno, std::generic_category(), "TUNSETGROUP");
}

}  // namespace zn::vmm
