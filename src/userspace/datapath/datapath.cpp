#include "userspace/datapath/datapath.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "tap_egress.skel.h"
#include "tap_ingress.skel.h"
#include "userspace/datapath/bpffs.h"
#include "zn_abi.h"

namespace zn::dp {
namespace {

std::string libbpf_error(int err) {
  char buf[128];
  libbpf_strerror(err, buf, sizeof(buf));
  return buf;
}

void pin_program(struct bpf_program* prog, const std::string& path) {
  // A previous run's pin names the old program; the new one replaces it.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("unlink " + path + ": " + std::strerror(errno));
  int err = bpf_program__pin(prog, path.c_str());
  if (err) throw std::runtime_error("pin " + path + ": " + libbpf_error(err));
}

// Pins left by another build cannot be reused when their layouts differ;
// say so plainly (libbpf would only report a map it could not reuse).
void check_pinned_abi(const std::string& pin_root) {
  const std::string marker = pin_root + "/zn_abi";
  bool any_pin = false;
  for (const auto& e : std::filesystem::directory_iterator(pin_root)) {
    (void)e;
    any_pin = true;
    break;
  }
  if (!any_pin) return;  // a fresh pin root
  const std::string advice =
      ": refusing to reuse its maps. Remove the pin root to start afresh (programs already attached to "
      "TAPs stay there, denying, until replaced).";
  int fd = bpf_obj_get(marker.c_str());
  if (fd < 0)
    throw std::runtime_error("the datapath pinned under " + pin_root +
                             " has no ABI marker (an older zeroness, ABI 1; this build is ABI " +
                             std::to_string(ZN_ABI_VERSION) + ")" + advice);
  __u32 key = 0, version = 0;
  const int err = bpf_map_lookup_elem(fd, &key, &version);
  ::close(fd);
  if (err != 0)
    throw std::runtime_error("cannot read the ABI marker " + marker + ": " + std::strerror(errno));
  if (version != ZN_ABI_VERSION)
    throw std::runtime_error("the datapath pinned under " + pin_root + " is ABI " + std::to_string(version) +
                             ", this build is ABI " + std::to_string(ZN_ABI_VERSION) + advice);
}

}  // namespace

std::unique_ptr<Datapath> Datapath::load(const DatapathOptions& options) {
  std::unique_ptr<Datapath> dp(new Datapath());
  dp->pin_root_ = options.pin_root;
  if (!dp->pin_root_.empty()) {
    ensure_pin_root(dp->pin_root_);
    check_pinned_abi(dp->pin_root_);
  }

  dp->ingress_ = tap_ingress__open();
  if (!dp->ingress_) throw std::runtime_error("open tap_ingress: " + libbpf_error(-errno));
  if (!dp->pin_root_.empty()) {
    struct bpf_map* map;
    bpf_object__for_each_map(map, dp->ingress_->obj) {
      // Internal maps (.kconfig) are the object's own, filled at each load;
      // a frozen one cannot be reused.
      if (bpf_map__is_internal(map)) continue;
      std::string path = dp->pin_root_ + "/" + bpf_map__name(map);
      int err = bpf_map__set_pin_path(map, path.c_str());
      if (err) throw std::runtime_error("pin path " + path + ": " + libbpf_error(err));
    }
  }
  int err = tap_ingress__load(dp->ingress_);
  if (err)
    throw std::runtime_error("load tap_ingress: " + libbpf_error(err) +
                             (dp->pin_root_.empty() ? ""
                                                    : " (maps pinned under " + dp->pin_root_ +
                                                          " may be from an incompatible version)"));

  // The egress program works on the very same maps.
  dp->egress_ = tap_egress__open();
  if (!dp->egress_) throw std::runtime_error("open tap_egress: " + libbpf_error(-errno));
  dp->share_maps_with(dp->egress_->obj);
  err = tap_egress__load(dp->egress_);
  if (err) throw std::runtime_error("load tap_egress: " + libbpf_error(err));

  const __u32 key = 0, version = ZN_ABI_VERSION;
  if (bpf_map_update_elem(bpf_map__fd(dp->ingress_->maps.zn_abi), &key, &version, BPF_ANY) != 0)
    throw std::runtime_error(std::string("write the ABI marker: ") + std::strerror(errno));
  if (!dp->pin_root_.empty()) {
    pin_program(dp->ingress_->progs.zn_tap_ingress, dp->pin_root_ + "/tap_ingress");
    pin_program(dp->egress_->progs.zn_tap_egress, dp->pin_root_ + "/tap_egress");
  }
  return dp;
}

Datapath::~Datapath() {
  // Pins and TC attachments keep the objects alive in the kernel after this.
  if (egress_) tap_egress__destroy(egress_);
  if (ingress_) tap_ingress__destroy(ingress_);
}

int Datapath::ingress_prog_fd() const { return bpf_program__fd(ingress_->progs.zn_tap_ingress); }
int Datapath::egress_prog_fd() const { return bpf_program__fd(egress_->progs.zn_tap_egress); }
int Datapath::sessions_fd() const { return bpf_map__fd(ingress_->maps.zn_sessions); }
int Datapath::listeners_fd() const { return bpf_map__fd(ingress_->maps.zn_listeners); }
int Datapath::l4_allow_fd() const { return bpf_map__fd(ingress_->maps.zn_l4_allow); }
int Datapath::l4_count_fd() const { return bpf_map__fd(ingress_->maps.zn_l4_count); }
int Datapath::counters_fd() const { return bpf_map__fd(ingress_->maps.zn_counters); }
int Datapath::events_fd() const { return bpf_map__fd(ingress_->maps.zn_events); }
int Datapath::event_buckets_fd() const { return bpf_map__fd(ingress_->maps.zn_ev_bucket); }
int Datapath::dns_buckets_fd() const { return bpf_map__fd(ingress_->maps.zn_dns_bucket); }
void Datapath::share_maps_with(struct bpf_object* obj) const {
  struct bpf_map* map;
  bpf_object__for_each_map(map, obj) {
    const struct bpf_map* shared = bpf_object__find_map_by_name(ingress_->obj, bpf_map__name(map));
    if (!shared) continue;
    const int err = bpf_map__reuse_fd(map, bpf_map__fd(shared));
    if (err)
      throw std::runtime_error(std::string("share map ") + bpf_map__name(map) + ": " + libbpf_error(err));
  }
}
DatapathMaps::Fds Datapath::map_fds() const {
  return {sessions_fd(), listeners_fd(),     l4_allow_fd(),   l4_count_fd(),
          counters_fd(), event_buckets_fd(), dns_buckets_fd()};
}

}  // namespace zn::dp
