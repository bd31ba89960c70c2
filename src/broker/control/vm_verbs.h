// vm.run, vm.list, vm.stop, vm.console, vm.backends: a session's microVM
// (broker/vms). Arguments are checked here; VmError says what to fix.
#pragma once

#include "broker/control/server.h"
#include "broker/vms/vm_registry.h"

namespace zn::broker {

void register_vm_verbs(ControlServer& server, VmRegistry& vms);

}  // namespace zn::broker
