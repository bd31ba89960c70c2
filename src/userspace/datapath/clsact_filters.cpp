#include "userspace/datapath/clsact_filters.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

namespace zn::dp::clsact {
namespace {

// libbpf reports the kernel's extended ack for outcomes we expect and handle
// (an existing clsact, an absent filter or qdisc on a best-effort detach or
// query); keep those out of the logs and pass everything else through.
int filter_expected_tc_noise(libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char line[512];
  std::vsnprintf(line, sizeof(line), format, args);
  if (std::strstr(line, "Exclusivity flag on") || std::strstr(line, "Cannot find specified filter chain") ||
      std::strstr(line, "Parent Qdisc doesn't exists") || std::strstr(line, "Specified qdisc not found"))
    return 0;
  return std::fputs(line, stderr);
}

void quiet_expected_tc_noise() {
  static std::once_flag once;
  std::call_once(once, [] { libbpf_set_print(filter_expected_tc_noise); });
}

bpf_tc_hook make_hook(int ifindex, bpf_tc_attach_point point) {
  bpf_tc_hook hook{};
  hook.sz = sizeof(hook);
  hook.ifindex = ifindex;
  hook.attach_point = point;
  return hook;
}

bpf_tc_opts make_opts(int prog_fd) {
  bpf_tc_opts opts{};
  opts.sz = sizeof(opts);
  opts.prog_fd = prog_fd;
  opts.handle = kTcHandle;
  opts.priority = kTcPriority;
  opts.flags = prog_fd ? BPF_TC_F_REPLACE : 0;
  return opts;
}

std::string describe(int err) {
  char buf[128];
  libbpf_strerror(err, buf, sizeof(buf));
  return buf;
}

bpf_tc_attach_point point_of(bool ingress) { return ingress ? BPF_TC_INGRESS : BPF_TC_EGRESS; }

}  // namespace

bool create_qdisc(int ifindex) {
  quiet_expected_tc_noise();
  bpf_tc_hook hook = make_hook(ifindex, static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS));
  int err = bpf_tc_hook_create(&hook);
  if (err && err != -EEXIST)
    throw std::runtime_error("create clsact on ifindex " + std::to_string(ifindex) + ": " + describe(err));
  return err == 0;
}

void destroy_qdisc(int ifindex) {
  bpf_tc_hook hook = make_hook(ifindex, static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS));
  bpf_tc_hook_destroy(&hook);
}

void attach(int ifindex, bool ingress, int prog_fd) {
  quiet_expected_tc_noise();
  bpf_tc_hook hook = make_hook(ifindex, point_of(ingress));
  bpf_tc_opts opts = make_opts(prog_fd);
  int err = bpf_tc_attach(&hook, &opts);
  if (err)
    throw std::runtime_error(std::string("attach ") + (ingress ? "ingress" : "egress") + " on ifindex " +
                             std::to_string(ifindex) + ": " + describe(err));
}

void detach(int ifindex, bool ingress) {
  quiet_expected_tc_noise();
  bpf_tc_hook hook = make_hook(ifindex, point_of(ingress));
  bpf_tc_opts opts = make_opts(0);
  bpf_tc_detach(&hook, &opts);  // best effort: absent filter or device is fine
}

bool has_ours(int ifindex, bool ingress) {
  quiet_expected_tc_noise();
  bpf_tc_hook hook = make_hook(ifindex, point_of(ingress));
  bpf_tc_opts opts = make_opts(0);
  return bpf_tc_query(&hook, &opts) == 0;
}

}  // namespace zn::dp::clsact
