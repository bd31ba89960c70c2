// The lab: a self-contained stand-in for a sandbox host, built from network
// namespaces so tests and demos never touch the machine's own networking.
//
//   <prefix>-host   the host side: guest TAPs zn-tap<n>, steering routes,
//                   forwarding on; later zerod runs here
//   <prefix>-inet   the stand-in internet, reached from host over veth
//                   inet0 <-> eth0; answers on lab_plan::upstream_ip4/6()
//   <prefix>-<name> one per guest; its eth0 (a TAP) is wired to zn-tap<n>
//                   by a frame pump process, like a VMM's virtio-net
//
// Addresses: see vmm/lab/addressing.h. State: /run/zeroness-lab/<prefix>/.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "vmm/lab/addressing.h"

namespace zn::vmm {

class Lab {
 public:
  static constexpr char kDefaultPrefix[] = "zn";

  // Builds host and inet namespaces, first removing leftovers of a lab with
  // the same prefix. prefix: 1-16 of [A-Za-z0-9_] (no '-': it separates the
  // prefix from the rest of a namespace name). The returned Lab owns the lab.
  static Lab up(const std::string& prefix = kDefaultPrefix);

  // A lab built by an earlier process (e.g. `zn-lab up`). The returned Lab
  // does not own it: destroying the object leaves the lab running.
  // Throws std::runtime_error if there is no such lab.
  static Lab attach(const std::string& prefix = kDefaultPrefix);

  // Tears down a lab by prefix, tolerating partial state (crash leftovers):
  // stops its pumps (pid files), deletes its host, inet and recorded guest
  // namespaces, removes its run directory. Throws the first error after trying everything.
  static void destroy(const std::string& prefix = kDefaultPrefix);

  Lab(Lab&& other) noexcept;
  Lab& operator=(Lab&&) = delete;
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;
  ~Lab();  // destroy(prefix()) if owning; never throws

  // Adds guest number guests().size(). name: 1-15 of [A-Za-z0-9_], not
  // "host"/"inet", unique in this lab. Returns a copy: guests() may reallocate.
  LabGuest add_guest(const std::string& name);

  // Stop owning: the lab outlives this object (for `zn-lab up`).
  void release() noexcept { owning_ = false; }

  const std::string& prefix() const { return prefix_; }
  std::string host_netns() const { return prefix_ + "-host"; }
  std::string inet_netns() const { return prefix_ + "-inet"; }
  const std::vector<LabGuest>& guests() const { return guests_; }
  const LabGuest& guest(const std::string& name) const;           // throws std::out_of_range
  std::optional<pid_t> pump_pid(const std::string& guest) const;  // if its pump is running

  static std::vector<in_addr> upstream_ip4() { return lab_plan::upstream_ip4(); }
  static std::vector<in6_addr> upstream_ip6() { return lab_plan::upstream_ip6(); }

 private:
  Lab(std::string prefix, bool owning);

  std::string prefix_;
  bool owning_;
  std::vector<LabGuest> guests_;
};

}  // namespace zn::vmm
