#include "zn-lab/governed_lab.h"

#include "broker/session/datapath_entry.h"

#include "common/netns.h"
#include "userspace/datapath/bpffs.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/tc_attachment.h"

namespace zn::lab {

using broker::session_entry_for;

std::string lab_pin_root(const std::string& lab_prefix) {
  return std::string(dp::kDefaultPinRoot) + "-" + lab_prefix;
}

void govern_lab(const vmm::Lab& lab) {
  NetnsScope in_host(lab.host_netns());
  auto datapath = dp::Datapath::load({lab_pin_root(lab.prefix())});
  dp::DatapathMaps maps(datapath->map_fds());
  maps.set_listeners({});
  for (const auto& g : lab.guests()) {
    maps.put_session(g.tap_ifindex, session_entry_for(g, g.slot + 1));
    dp::TcAttachment::attach(g.tap_ifindex, datapath->ingress_prog_fd(), datapath->egress_prog_fd())
        .release();
  }
}

void ungovern_lab(const std::string& lab_prefix) { dp::remove_pin_root(lab_pin_root(lab_prefix)); }

}  // namespace zn::lab
