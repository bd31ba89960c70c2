// Control-plane cost of a large policy: parse, compile and map update for N
// rules (default 10,000). Figures are printed with a baseline measured in the
// same run — nlohmann::json parsing of the same document, the floor any JSON
// policy pays — and the absolute target of < 50 ms compile.
// Usage: policy_compile_bench [rules] [rounds]
// Every row is also printed as one machine-readable line (scripts/bench.sh):
//   RESULT name=<step> rules=<n> ms=<ms> base_ms=<json parse ms> ratio=<x>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "broker/policy/compiled.h"
#include "broker/policy/datapath_plan.h"
#include "broker/policy/parser.h"
#include "support/verdict_fixtures.h"
#include "synthetic_policy.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rules = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::string doc = zn::bench::make_policy(rules);
  zn::test::FixtureDatapath datapath;  // private maps: the real trie
  const uint32_t idx = zn::test::FixtureGuest::kSessionIdx;
  auto no_names = [](const std::string&) { return std::vector<zn::broker::ResolvedAddress>{}; };

  std::vector<double> json_ms, parse_ms, compile_ms, plan_ms, apply_ms, remove_ms;
  size_t entries = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t = Clock::now();
    auto raw = nlohmann::json::parse(doc);
    json_ms.push_back(ms_since(t));

    t = Clock::now();
    auto policy = zn::broker::parse_policy(doc);
    parse_ms.push_back(ms_since(t));

    t = Clock::now();
    auto compiled = zn::broker::CompiledPolicy::compile(std::move(policy));
    compile_ms.push_back(ms_since(t));

    t = Clock::now();
    auto plan = zn::broker::plan_datapath(*compiled, no_names);
    plan_ms.push_back(ms_since(t));
    entries = plan.l4_rules.size();

    datapath.maps().delete_l4_rules(idx);
    t = Clock::now();
    zn::broker::apply_l4_change(datapath.maps(), idx, {}, plan);
    apply_ms.push_back(ms_since(t));

    t = Clock::now();
    zn::broker::apply_l4_change(datapath.maps(), idx, plan, {});
    remove_ms.push_back(ms_since(t));
  }
  const double base = median(json_ms);
  const double parse_compile = median(parse_ms) + median(compile_ms) + median(plan_ms);
  std::printf("policy of %d rules (%zu bytes), %zu L4 map entries, %d rounds (median)\n", rules, doc.size(),
              entries, rounds);
  std::printf("%-34s %9s %8s\n", "step", "ms", "x json");
  std::string results;
  auto row = [&](const char* key, const char* name, double ms) {
    std::printf("%-34s %9.2f %7.2fx\n", name, ms, ms / base);
    char line[160];
    std::snprintf(line, sizeof(line), "RESULT name=%s rules=%d ms=%.4f base_ms=%.4f ratio=%.4f\n", key, rules,
                  ms, base, ms / base);
    results += line;
  };
  row("json_parse", "baseline: nlohmann::json::parse", base);
  row("parse_policy", "parse + validate (parse_policy)", median(parse_ms));
  row("compile", "compile (CompiledPolicy)", median(compile_ms));
  row("plan", "plan datapath entries", median(plan_ms));
  row("map_insert", "map update: insert L4 entries", median(apply_ms));
  row("map_remove", "map update: remove L4 entries", median(remove_ms));
  row("compile_total", "compile total (parse+compile+plan)", parse_compile);
  std::fputs(results.c_str(), stdout);
  std::printf("RESULT name=l4_entries rules=%d count=%zu\n", rules, entries);
  std::printf("compile total (parse+compile+plan) %.2f ms: target < 50 ms %s\n", parse_compile,
              parse_compile < 50 ? "met" : "MISSED");
  return 0;
}
