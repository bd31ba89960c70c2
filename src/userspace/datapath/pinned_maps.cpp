#include "userspace/datapath/pinned_maps.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace zn::dp {
namespace {

int open_pin(const std::string& pin_root, const char* name) {
  const std::string path = pin_root + "/" + name;
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open pinned map " + path);
  return fd;
}

}  // namespace

PinnedMaps PinnedMaps::open(const std::string& pin_root) {
  PinnedMaps m;
  m.sessions_ = open_pin(pin_root, "zn_sessions");
  m.listeners_ = open_pin(pin_root, "zn_listeners");
  m.l4_allow_ = open_pin(pin_root, "zn_l4_allow");
  m.l4_count_ = open_pin(pin_root, "zn_l4_count");
  m.counters_ = open_pin(pin_root, "zn_counters");
  m.event_buckets_ = open_pin(pin_root, "zn_ev_bucket");
  m.dns_buckets_ = open_pin(pin_root, "zn_dns_bucket");
  m.events_ = open_pin(pin_root, "zn_events");
  return m;
}

PinnedMaps::PinnedMaps(PinnedMaps&& o) noexcept
    : sessions_(std::exchange(o.sessions_, -1)),
      listeners_(std::exchange(o.listeners_, -1)),
      l4_allow_(std::exchange(o.l4_allow_, -1)),
      l4_count_(std::exchange(o.l4_count_, -1)),
      counters_(std::exchange(o.counters_, -1)),
      event_buckets_(std::exchange(o.event_buckets_, -1)),
      dns_buckets_(std::exchange(o.dns_buckets_, -1)),
      events_(std::exchange(o.events_, -1)) {}

PinnedMaps::~PinnedMaps() {
  for (int fd :
       {sessions_, listeners_, l4_allow_, l4_count_, counters_, event_buckets_, dns_buckets_, events_})
    if (fd >= 0) ::close(fd);
}

DatapathMaps::Fds PinnedMaps::fds() const {
  return {sessions_, listeners_, l4_allow_, l4_count_, counters_, event_buckets_, dns_buckets_};
}

}  // namespace zn::dp
