// Attaching the datapath programs to a device's TC ingress and egress hooks:
// through a clsact qdisc with our filters (clsact_filters.h), or through TCX
// (tcx_hooks.h: no qdisc, ours first; Linux 6.6+). Either way the attachment
// is the device's: it stays when zerod exits or crashes (the device keeps
// denying) and goes with the device.
//
// clsact is the default because it is measured faster where zerod's costs
// are (10,000 sessions, kernel 6.18): TCX's first attach to a device waits a
// full RCU grace period under the RTNL, twice per TAP (ingress and egress),
// so a session took 32 ms to create instead of 4, and TAPs were reaped at
// 37/s instead of 252/s.
#pragma once

namespace zn::dp {

enum class TcBackend { kTcx, kClsact };

class TcAttachment {
 public:
  // Attaches (replacing our previous programs on the device in place, so a
  // hook is never without one of ours). Throws std::runtime_error.
  static TcAttachment attach(int ifindex, int ingress_prog_fd, int egress_prog_fd);
  TcAttachment(TcAttachment&& other) noexcept;
  TcAttachment& operator=(TcAttachment&& other) noexcept;
  ~TcAttachment();

  // Removes our programs from both hooks, never anyone else's (and the
  // clsact qdisc only if this object created it). A vanished interface
  // counts as detached.
  void detach();
  // Leaves the programs attached when this object goes away: the device
  // keeps denying while userspace is down.
  void release() { attached_ = false; }

  int ifindex() const { return ifindex_; }
  bool created_qdisc() const { return created_qdisc_; }

  // True when our program is on the ifindex's ingress hook (TCX, or a clsact
  // filter of ours: a device an earlier version parked still denies).
  static bool is_attached(int ifindex);
  // Removes our programs the other backend attached (a zerod configured
  // the other way before this start), best effort; a clsact qdisc stays (it
  // may not be ours). Returns whether there were any.
  static bool remove_other_backend(int ifindex);

  // The backend attach() uses from now on; clsact until told otherwise.
  static TcBackend backend();
  static void use_backend(TcBackend backend);
  // Whether this kernel has TCX.
  static bool tcx_supported();

 private:
  TcAttachment(int ifindex, TcBackend backend, bool created_qdisc)
      : ifindex_(ifindex), backend_(backend), created_qdisc_(created_qdisc), attached_(true) {}
  int ifindex_ = 0;
  TcBackend backend_ = TcBackend::kClsact;
  bool created_qdisc_ = false;
  bool attached_ = false;
};

}  // namespace zn::dp
