// Attaching the datapath programs to a TAP's clsact ingress and egress hooks.
#pragma once

namespace zn::dp {

// Handle and priority of our filters; fixed so a restarted daemon replaces
// its own filters in place and never touches anyone else's.
inline constexpr unsigned kTcHandle = 0x2a;
inline constexpr unsigned kTcPriority = 1;

class TcAttachment {
 public:
  // Creates clsact on ifindex if missing (tolerating one that exists) and
  // attaches (replacing our previous filters atomically). Throws on failure.
  static TcAttachment attach(int ifindex, int ingress_prog_fd, int egress_prog_fd);
  TcAttachment(TcAttachment&& other) noexcept;
  TcAttachment& operator=(TcAttachment&& other) noexcept;
  ~TcAttachment();

  // Removes our filters, and the clsact qdisc only if this object created it.
  // A vanished interface counts as detached.
  void detach();
  // Leaves the programs attached when this object goes away: the TAP keeps
  // denying while userspace is down.
  void release() { attached_ = false; }

  int ifindex() const { return ifindex_; }
  bool created_qdisc() const { return created_qdisc_; }

  // True when our filter is on the ifindex's ingress hook.
  static bool is_attached(int ifindex);

 private:
  TcAttachment(int ifindex, bool created_qdisc)
      : ifindex_(ifindex), created_qdisc_(created_qdisc), attached_(true) {}
  int ifindex_ = 0;
  bool created_qdisc_ = false;
  bool attached_ = false;
};

}  // namespace zn::dp
