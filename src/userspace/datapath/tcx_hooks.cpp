#include "userspace/datapath/tcx_hooks.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "userspace/net/unique_fd.h"

namespace zn::dp::tcx {
namespace {

// TCX's uapi (Linux 6.6). Debian 12's kernel headers (6.1) and libbpf 1.1
// predate it; the values are the kernel's ABI and never change.
constexpr int kTcxIngress = 46;       // BPF_TCX_INGRESS
constexpr int kTcxEgress = 47;        // BPF_TCX_EGRESS
constexpr unsigned kFirst = 1U << 3;  // BPF_F_BEFORE, with no relative: the front
static_assert(BPF_F_REPLACE == 1U << 2, "the kernel's BPF_F_REPLACE");

struct Hook {
  int type;
  const char* ours;  // our program's name on this hook
  const char* what;
};
constexpr Hook kIngress{kTcxIngress, "zn_tap_ingress", "ingress"};
constexpr Hook kEgress{kTcxEgress, "zn_tap_egress", "egress"};

const Hook& hook_of(bool ingress) { return ingress ? kIngress : kEgress; }
bpf_attach_type attach_type(const Hook& hook) { return static_cast<bpf_attach_type>(hook.type); }

std::string describe(int err) { return std::strerror(err < 0 ? -err : err); }

// A loaded program's name and id; an empty name if it cannot be read.
struct ProgIdentity {
  uint32_t id = 0;
  std::string name;
};
ProgIdentity identity_of(int prog_fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return {};
  return {info.id, std::string(info.name, strnlen(info.name, sizeof(info.name)))};
}

// The programs on a hook, in the order they run. Returns -errno, or 0.
int attached_ids(int ifindex, const Hook& hook, std::vector<uint32_t>& out) {
  std::array<uint32_t, 64> ids{};
  struct bpf_prog_query_opts query {};
  query.sz = sizeof(query);
  query.prog_ids = ids.data();
  query.prog_cnt = ids.size();
  const int err = bpf_prog_query_opts(ifindex, attach_type(hook), &query);
  if (err) return err;
  out.assign(ids.begin(), ids.begin() + std::min<size_t>(query.prog_cnt, ids.size()));
  return 0;
}

// One of ours on a hook: its id and an open fd.
struct Ours {
  uint32_t id;
  net::UniqueFd fd;
};

// Ours on the hook (by name), in the order they run.
std::vector<Ours> ours_on(int ifindex, const Hook& hook, const std::string& name, int* err) {
  std::vector<uint32_t> ids;
  std::vector<Ours> out;
  *err = attached_ids(ifindex, hook, ids);
  for (uint32_t id : ids) {
    net::UniqueFd fd(bpf_prog_get_fd_by_id(id));
    if (fd && identity_of(fd.get()).name == name) out.push_back({id, std::move(fd)});
  }
  return out;
}

}  // namespace

bool supported() {
  // A query of loopback's hook: EINVAL where the kernel knows no such
  // attach type.
  static const bool yes = [] {
    std::vector<uint32_t> ids;
    return attached_ids(1, kIngress, ids) != -EINVAL;
  }();
  return yes;
}

void attach(int ifindex, bool ingress, int prog_fd) {
  const Hook& hook = hook_of(ingress);
  auto fail = [&](int err) {
    throw std::runtime_error(std::string("attach ") + hook.what + " on ifindex " + std::to_string(ifindex) +
                             ": " + describe(err));
  };
  const ProgIdentity self = identity_of(prog_fd);
  if (self.name.empty()) fail(EBADF);
  int err = 0;
  std::vector<Ours> ours = ours_on(ifindex, hook, self.name, &err);
  if (err) fail(err);
  const bool placed =  // already this very program
      std::any_of(ours.begin(), ours.end(), [&](const Ours& o) { return o.id == self.id; });
  if (!placed) {
    struct bpf_prog_attach_opts opts {};
    opts.sz = sizeof(opts);
    if (!ours.empty()) {
      // In place: the hook is never without one of ours.
      opts.flags = BPF_F_REPLACE;
      opts.replace_prog_fd = ours.front().fd.get();
    } else {
      opts.flags = kFirst;
    }
    err = bpf_prog_attach_opts(prog_fd, ifindex, attach_type(hook), &opts);
    if (err) fail(err);
  }
  // More than one of ours (another zerod's, a crash between two attaches):
  // only the one just placed stays.
  for (size_t i = placed ? 0 : 1; i < ours.size(); ++i)
    if (ours[i].id != self.id) bpf_prog_detach2(ours[i].fd.get(), ifindex, attach_type(hook));
}

void detach(int ifindex, bool ingress) {
  const Hook& hook = hook_of(ingress);
  int err = 0;
  for (const Ours& o : ours_on(ifindex, hook, hook.ours, &err))
    bpf_prog_detach2(o.fd.get(), ifindex, attach_type(hook));
}

bool has_ours(int ifindex, bool ingress) {
  const Hook& hook = hook_of(ingress);
  int err = 0;
  return !ours_on(ifindex, hook, hook.ours, &err).empty();
}

}  // namespace zn::dp::tcx
