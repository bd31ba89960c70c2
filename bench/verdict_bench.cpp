// Verdict cost: ns/packet of each TC verdict path through BPF_PROG_TEST_RUN,
// printed as a ratio to a pass-through TC program measured in the same run.
// Rounds alternate baseline and path so machine noise hits both alike; the
// median of the rounds is reported. Usage: verdict_bench [repeat] [rounds]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "passthrough.skel.h"
#include "support/verdict_fixtures.h"
#include "userspace/verdict_names.h"

namespace {

struct Path {
  const char* label;
  const char* fixture;
  double target;            // max ratio to pass-through, 0 = no target
  bool no_l4_rules = false;  // measured after the session's L4 rules are gone
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t repeat = argc > 1 ? static_cast<uint32_t>(std::atoi(argv[1])) : 1000000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::vector<Path> paths = {
      {"arp (pass)", "arp_request", 0},
      {"dns udp/53 -> DNS socket", "udp53_to_8888", 1.5},
      {"drop tcp/22 (+event, rate-limited)", "tcp22", 1.5},
      {"drop spoofed ipv4 source", "ip4_spoofed_source", 1.5},
      {"steer tcp/443 -> proxy (2 lookups)", "tcp443_steered", 0},
      {"l4 allow tcp/5432 (trie + lookups)", "tcp5432_l4_allowed", 0},
      {"egress host reply", "egress_host_reply", 0},
      {"egress unsolicited drop", "egress_unmarked", 1.5},
      {"drop tcp/22, session without L4 rules", "tcp22", 1.5, true},
  };

  zn::test::FixtureDatapath datapath;
  passthrough* baseline = passthrough__open_and_load();
  if (!baseline) {
    std::fprintf(stderr, "cannot load the pass-through program\n");
    return 1;
  }
  const int baseline_fd = bpf_program__fd(baseline->progs.zn_passthrough);
  const auto fixtures = zn::test::verdict_fixtures();

  std::printf("verdict cost via BPF_PROG_TEST_RUN, repeat=%u, rounds=%d (median)\n", repeat, rounds);
  std::printf("%-38s %10s %10s %7s  %s\n", "path", "ns/pkt", "base ns", "ratio", "target");
  int missed = 0;
  for (const Path& path : paths) {
    if (path.no_l4_rules) datapath.maps().delete_l4_rules(zn::test::FixtureGuest::kSessionIdx);
    auto it = std::find_if(fixtures.begin(), fixtures.end(),
                           [&](const auto& f) { return f.name == path.fixture; });
    if (it == fixtures.end()) {
      std::fprintf(stderr, "no fixture %s\n", path.fixture);
      return 1;
    }
    std::vector<double> ns, base, ratio;
    for (int r = 0; r < rounds; ++r) {
      uint32_t b = 0, p = 0;
      datapath.run_prog(baseline_fd, it->frame, it->mark, repeat, &b);
      datapath.run(*it, repeat, &p);
      base.push_back(b);
      ns.push_back(p);
      ratio.push_back(b ? static_cast<double>(p) / b : 0);
    }
    const double rmed = median(ratio);
    std::string verdict = "-";
    if (path.target > 0) {
      bool met = rmed <= path.target;
      missed += !met;
      char buf[48];
      std::snprintf(buf, sizeof(buf), "<= %.1fx %s", path.target, met ? "met" : "MISSED");
      verdict = buf;
    }
    std::printf("%-38s %10.1f %10.1f %6.2fx  %s\n", path.label, median(ns), median(base), rmed,
                verdict.c_str());
  }
  passthrough__destroy(baseline);
  std::printf("targets missed: %d\n", missed);
  return 0;
}
