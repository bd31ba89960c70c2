// What a microVM is told at boot (issue 14): its network from the session
// (addresses, gateways, resolver, MTU, MAC), the deployment CA to trust, and
// the operator's optional user-data script — as a small cpio archive the host
// appends to the shared initramfs (newc_archive.h). The guest image's /init
// (scripts/guest/init) reads /zn/guest.conf. Nothing secret is ever in it:
// the CA is the public certificate, and user-data is the operator's script,
// shown in `vm console` like the rest of the boot.
#pragma once

#include <string>

#include "vmm/host/guest_network.h"

namespace zn::vmm {

struct GuestBoot {
  GuestNetwork network;
  std::string hostname;         // the session id
  std::string ca_pem;           // the deployment CA certificate (public)
  std::string user_data;        // a sh script run once at boot; "" none
  bool poweroff_after = false;  // power off once user-data has run
};

// /zn/guest.conf: KEY=value lines (ZN_IP4, ZN_GW4, ZN_IP6, ZN_GW6, ZN_DNS,
// ZN_MTU, ZN_MAC, ZN_HOSTNAME, ZN_POWEROFF).
std::string guest_conf(const GuestBoot& boot);

// The archive: zn/, zn/guest.conf, zn/ca.pem, and zn/user-data when given.
std::string guest_config_archive(const GuestBoot& boot);

}  // namespace zn::vmm
