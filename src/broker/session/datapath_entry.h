// The datapath's view of a session: what its TC programs need to know of a
// guest's network identity (zn_abi.h struct zn_session), for one slot.
#pragma once

#include <cstdint>

#include "userspace/datapath/maps.h"
#include "vmm/host/guest_network.h"

namespace zn::broker {

// The datapath session for a guest's network identity (a lab guest is one).
dp::SessionEntry session_entry_for(const vmm::GuestNetwork& net, uint32_t session_idx);

}  // namespace zn::broker
