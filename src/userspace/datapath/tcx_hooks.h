// TCX: the kernel's multi-program TC hooks (Linux 6.6), attached with
// BPF_PROG_ATTACH and BPF_TCX_INGRESS/EGRESS and owned by the device (not a
// link: they stay when zerod exits and go with the device). No qdisc: a
// clsact qdisc made and destroyed per TAP cost the kernel a walk of every
// flow block on each (flow_indr_dev_setup_offload: 13 % of the host's CPU
// creating 10,000 sessions and 6 % deleting them).
//
// Ours are known by program name (a restarted zerod loads new programs, so
// ids differ) and placed first on a hook, so no program attached before ours
// decides ahead of it.
#pragma once

namespace zn::dp::tcx {

// Whether this kernel has TCX (probed once).
bool supported();
// Attaches `prog_fd` first on the hook, or in place of ours already there
// (by name: the hook is never without one of ours); drops any further copy
// of ours. Throws std::runtime_error naming the hook and ifindex.
void attach(int ifindex, bool ingress, int prog_fd);
// Removes ours (by name) from the hook, never anyone else's; best effort (a
// vanished device is detached).
void detach(int ifindex, bool ingress);
// Whether ours is on the hook.
bool has_ours(int ifindex, bool ingress);

}  // namespace zn::dp::tcx
