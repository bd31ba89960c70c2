// Verdict cost: ns/packet of each TC verdict path through BPF_PROG_TEST_RUN,
// printed as a ratio to a pass-through TC program measured in the same run.
// Rounds alternate baseline and path so machine noise hits both alike; the
// median of the rounds is reported.
//
// Usage: verdict_bench [repeat] [rounds] [--l4-rules N[,N...]]
//   --l4-rules  also measures the DNS, drop, steer and L4 paths with N extra
//               entries in the session's zn_l4_allow trie (e.g. 10,1000,10000)
// Besides the table, every figure is printed as one machine-readable line:
//   RESULT name=<path> rules=<fixture|N> ns=<ns> base_ns=<ns> ratio=<x> target=<x|0>
// rules: "fixture" = the fixture's two L4 rules, N = N more entries in the trie,
// "port-only" = 7501 entries without any-port rules, 0 = none.
// (scripts/bench.sh parses these).
#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "passthrough.skel.h"
#include "support/verdict_fixtures.h"
#include "userspace/datapath/verdict_names.h"

namespace {

struct Path {
  const char* name;   // machine-readable
  const char* label;  // for the table
  const char* fixture;
  double target;             // max ratio to pass-through, 0 = no target
  bool no_l4_rules = false;  // measured after the session's L4 rules are gone
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// n extra trie entries for the fixture session, around the fixture's own
// rules (198.18.0.20/32:5432, 198.18.1.0/24:any) so lookups walk a deep trie:
// consecutive /32s from 198.18.2.0 on, three in four on port 5432, one in
// four on any port. None matches a fixture destination.
std::vector<zn::dp::L4Rule> extra_rules(unsigned n) {
  std::vector<zn::dp::L4Rule> out;
  const uint32_t first = ntohl(inet_addr("198.18.2.0"));
  for (unsigned i = 0; i < n; ++i) {
    zn::dp::L4Rule r;
    r.family = 4;
    const uint32_t a = htonl(first + i);
    std::memcpy(r.addr.data(), &a, 4);
    r.prefix_len = 32;
    r.port = i % 4 == 0 ? 0 : 5432;
    r.rule_id = 1000 + i;
    out.push_back(r);
  }
  return out;
}

std::vector<unsigned> parse_list(const char* text) {
  std::vector<unsigned> out;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const unsigned long n = std::strtoul(p, &end, 10);
    if (end == p) break;
    out.push_back(static_cast<unsigned>(n));
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<const char*> positional;
  std::vector<unsigned> rule_counts;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--l4-rules") == 0 && i + 1 < argc)
      rule_counts = parse_list(argv[++i]);
    else
      positional.push_back(argv[i]);
  }
  const uint32_t repeat = positional.size() > 0 ? static_cast<uint32_t>(std::atoi(positional[0])) : 1000000;
  const int rounds = positional.size() > 1 ? std::atoi(positional[1]) : 5;
  const std::vector<Path> paths = {
      {"arp_pass", "arp (pass)", "arp_request", 0},
      {"dns_udp53", "dns udp/53 -> DNS socket", "udp53_to_8888", 1.5},
      {"drop_tcp22", "drop tcp/22 (+event, rate-limited)", "tcp22", 1.5},
      {"drop_spoofed_ip4", "drop spoofed ipv4 source", "ip4_spoofed_source", 1.5},
      {"steer_tcp443", "steer tcp/443 -> proxy (2 lookups)", "tcp443_steered", 0},
      {"l4_allow_tcp5432", "l4 allow tcp/5432 (trie + lookups)", "tcp5432_l4_allowed", 0},
      {"egress_host_reply", "egress host reply", "egress_host_reply", 0},
      {"egress_unsolicited_drop", "egress unsolicited drop", "egress_unmarked", 1.5},
  };
  // The same paths again with n entries in the trie (the fixture's two plus n).
  const std::vector<Path> trie_paths = {
      {"dns_udp53", "dns udp/53 -> DNS socket", "udp53_to_8888", 1.5},
      {"drop_tcp22", "drop tcp/22 (trie miss)", "tcp22", 1.5},
      {"steer_tcp443", "steer tcp/443 -> proxy", "tcp443_steered", 0},
      {"l4_allow_tcp5432", "l4 allow tcp/5432 (trie hit)", "tcp5432_l4_allowed", 0},
      {"l4_miss_tcp5433", "drop tcp/5433 (trie miss)", "tcp5433_not_l4_allowed", 1.5},
  };

  zn::test::FixtureDatapath datapath;
  passthrough* baseline = passthrough__open_and_load();
  if (!baseline) {
    std::fprintf(stderr, "cannot load the pass-through program\n");
    return 1;
  }
  const int baseline_fd = bpf_program__fd(baseline->progs.zn_passthrough);
  const auto fixtures = zn::test::verdict_fixtures();
  const uint32_t sidx = zn::test::FixtureGuest::kSessionIdx;

  int missed = 0;
  auto measure = [&](const Path& path, const std::string& rules) -> bool {
    auto it =
        std::find_if(fixtures.begin(), fixtures.end(), [&](const auto& f) { return f.name == path.fixture; });
    if (it == fixtures.end()) {
      std::fprintf(stderr, "no fixture %s\n", path.fixture);
      return false;
    }
    std::vector<double> ns, base, ratio;
    {  // warm-up pair, not measured: caches and branch predictors for this frame
      uint32_t unused = 0;
      datapath.run_prog(baseline_fd, it->frame, it->mark, repeat / 10 + 1, &unused);
      datapath.run(*it, repeat / 10 + 1, &unused);
    }
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
    std::printf("RESULT name=%s rules=%s ns=%.2f base_ns=%.2f ratio=%.4f target=%.2f\n", path.name,
                rules.c_str(), median(ns), median(base), rmed, path.target);
    return true;
  };

  std::printf("verdict cost via BPF_PROG_TEST_RUN, repeat=%u, rounds=%d (median)\n", repeat, rounds);
  std::printf("%-38s %10s %10s %7s  %s\n", "path", "ns/pkt", "base ns", "ratio", "target");
  for (const Path& path : paths)
    if (!measure(path, "fixture")) return 1;

  for (unsigned n : rule_counts) {
    const auto fixture_rules = datapath.maps().l4_rules(sidx);
    auto with_extra = fixture_rules;
    const auto extra = extra_rules(n);
    with_extra.insert(with_extra.end(), extra.begin(), extra.end());
    datapath.maps().replace_l4_rules(sidx, fixture_rules, with_extra);
    const unsigned total = datapath.maps().l4_rule_count(sidx);
    std::printf("-- with %u entries in zn_l4_allow for the session\n", total);
    for (const Path& path : trie_paths)
      if (!measure(path, std::to_string(n))) return 1;
    datapath.maps().replace_l4_rules(sidx, with_extra, fixture_rules);
  }

  // Port-only rules (no any-port rule, the common policy): a denied port no
  // rule names skips the trie whatever its size (zn_l4_summary).
  {
    const auto fixture_rules = datapath.maps().l4_rules(sidx);
    std::vector<zn::dp::L4Rule> port_only;
    for (const auto& r : fixture_rules)
      if (r.port != 0) port_only.push_back(r);
    for (auto r : extra_rules(10000))
      if (r.port != 0) port_only.push_back(r);
    datapath.maps().replace_l4_rules(sidx, fixture_rules, port_only);
    std::printf("-- with %u port-only entries in zn_l4_allow for the session\n",
                datapath.maps().l4_rule_count(sidx));
    if (!measure({"drop_tcp22", "drop tcp/22 (port-only rules)", "tcp22", 1.5}, "port-only")) return 1;
    if (!measure({"l4_allow_tcp5432", "l4 allow tcp/5432 (port-only rules)", "tcp5432_l4_allowed", 0},
                 "port-only"))
      return 1;
  }

  // Last: the session's L4 rules gone (the datapath skips the trie).
  datapath.maps().delete_l4_rules(sidx);
  std::printf("-- session without L4 rules\n");
  if (!measure({"drop_tcp22", "drop tcp/22, no L4 rules", "tcp22", 1.5}, "0")) return 1;
  passthrough__destroy(baseline);
  std::printf("targets missed: %d\n", missed);
  return 0;
}
