#include "userspace/datapath/listener_lookup.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "listener_lookup.skel.h"

namespace zn::dp {
namespace {

std::string errno_text(int err) { return std::strerror(err < 0 ? -err : err); }

}  // namespace

ListenerLookup::ListenerLookup(const Datapath& datapath) {
  skel_ = listener_lookup__open();
  if (!skel_) throw std::runtime_error("open listener_lookup: " + errno_text(errno));
  try {
    // The datapath's maps (zn_sessions: which devices are governed;
    // zn_listeners), not copies; only the socket map is this object's own.
    datapath.share_maps_with(skel_->obj);
    const int err = listener_lookup__load(skel_);
    if (err) throw std::runtime_error("load listener_lookup: " + errno_text(err));
    net::UniqueFd netns(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (netns.get() < 0) throw std::runtime_error("open the network namespace: " + errno_text(errno));
    link_ = net::UniqueFd(bpf_link_create(bpf_program__fd(skel_->progs.zn_listener_lookup), netns.get(),
                                          BPF_SK_LOOKUP, nullptr));
    if (link_.get() < 0) throw std::runtime_error("attach listener_lookup (sk_lookup): " + errno_text(errno));
  } catch (...) {
    listener_lookup__destroy(skel_);
    throw;
  }
}

ListenerLookup::~ListenerLookup() {
  link_.reset();  // detached: the namespace's lookup is the kernel's own again
  listener_lookup__destroy(skel_);
}

void ListenerLookup::set(ListenerKind kind, int listener_fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(listener_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("listener lookup: getsockname: " + errno_text(errno));
  __u32 slot = kind == ListenerKind::kDns ? ZN_LISTENER_DNS4 : ZN_LISTENER_PROXY4;
  if (addr.ss_family == AF_INET6) slot += 1;
  const __u64 value = static_cast<__u64>(listener_fd);
  if (bpf_map_update_elem(bpf_map__fd(skel_->maps.zn_listen_socks), &slot, &value, BPF_ANY) != 0)
    throw std::runtime_error("listener lookup: add listener: " + errno_text(errno));
}

}  // namespace zn::dp
