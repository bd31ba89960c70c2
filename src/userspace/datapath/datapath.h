// Loading the TAP datapath: both BPF programs and their shared maps.
#pragma once

#include <memory>
#include <string>

#include "userspace/datapath/maps.h"

struct bpf_object;
struct tap_ingress;
struct tap_egress;

namespace zn::dp {

struct DatapathOptions {
  // Where maps and programs are pinned; empty = not pinned (fixture tests and
  // benchmarks get private maps that vanish with the process).
  std::string pin_root;
};

// Owns the loaded programs. With a pin root, maps already pinned there are
// reused (state survives a restart of the daemon) and the fresh programs are
// pinned next to them. Attaching is TcAttachment's job.
class Datapath {
 public:
  static std::unique_ptr<Datapath> load(const DatapathOptions& options);
  ~Datapath();
  Datapath(const Datapath&) = delete;
  Datapath& operator=(const Datapath&) = delete;

  int ingress_prog_fd() const;
  int egress_prog_fd() const;
  int sessions_fd() const;
  int listeners_fd() const;
  int l4_allow_fd() const;
  int l4_count_fd() const;
  int counters_fd() const;
  int events_fd() const;
  int event_buckets_fd() const;
  int dns_buckets_fd() const;
  DatapathMaps::Fds map_fds() const;
  // Before `obj` is loaded: each of its maps that the datapath has (by name
  // in the BPF source) becomes the datapath's, not a copy (the egress
  // program, the listener lookup). Throws when libbpf refuses one.
  void share_maps_with(struct bpf_object* obj) const;
  const std::string& pin_root() const { return pin_root_; }

 private:
  Datapath() = default;
  struct tap_ingress* ingress_ = nullptr;
  struct tap_egress* egress_ = nullptr;
  std::string pin_root_;
};

}  // namespace zn::dp
