// Classic TC: a clsact qdisc with our BPF filters (handle kTcHandle,
// priority kTcPriority, direct action). The datapath's attachment on kernels
// without TCX (before Linux 6.6), and what earlier versions of zerod
// attached everywhere: a device they left is found and cleaned by these.
#pragma once

namespace zn::dp::clsact {

// Handle and priority of our filters; fixed so a restarted daemon replaces
// its own filters in place and never touches anyone else's.
inline constexpr unsigned kTcHandle = 0x2a;
inline constexpr unsigned kTcPriority = 1;

// Creates the clsact qdisc if missing (tolerating one that exists); true if
// this call made it. Throws std::runtime_error.
bool create_qdisc(int ifindex);
void destroy_qdisc(int ifindex);
// Attaches (replacing our previous filter atomically). Throws.
void attach(int ifindex, bool ingress, int prog_fd);
// Removes our filter; best effort (an absent filter or device is fine).
void detach(int ifindex, bool ingress);
bool has_ours(int ifindex, bool ingress);

}  // namespace zn::dp::clsact
