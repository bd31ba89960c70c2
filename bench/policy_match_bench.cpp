// Google Benchmark micro-benchmarks of the policy lookups the proxy and the
// DNS responder make per connection/request, each next to a baseline in the
// same binary: an std::unordered_map<std::string, int> find of the same host
// string (a copy of the view plus one hash lookup — the floor of any
// name-keyed lookup). scripts/bench.sh runs this with interleaved repetitions
// and reports every figure as a ratio to the baseline of the same size.
//
// Names: <what>/<rules>; the baseline of <what>/<n> is baseline_map_find/<n>
// (host lookups, match_request) or baseline_lowercase_copy (name parsing),
// baseline_prefix_compare (path globs).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <string>
#include <string_view>
#include <unordered_map>

#include "broker/policy/compiled.h"
#include "broker/policy/host_pattern.h"
#include "broker/policy/path_pattern.h"
#include "broker/policy/parser.h"
#include "synthetic_policy.h"

namespace {

using zn::broker::CompiledPolicy;

// The largest index below n/2 (at least 0) with i % 4 == kind: a rule from
// the middle of the policy.
int middle(int n, int kind) {
  int i = n / 2 - ((n / 2) % 4) + kind;
  while (i >= n) i -= 4;
  return i < 0 ? kind : i;
}

struct Fixture {
  std::shared_ptr<const CompiledPolicy> policy;
  std::unordered_map<std::string, int> map;  // the baseline: every host of the policy
  std::string exact, wildcard, deny, miss;
};

const Fixture& fixture(int n) {
  static std::unordered_map<int, Fixture> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  Fixture f;
  f.policy = CompiledPolicy::compile(zn::broker::parse_policy(zn::bench::make_policy(n)));
  for (int i = 0; i < n; ++i) {
    const std::string s = std::to_string(i);
    const std::string host = i % 4 == 0   ? "api" + s + ".example.com"
                             : i % 4 == 1 ? "svc" + s + ".example.net"
                             : i % 4 == 2 ? "198.18.0." + s
                                          : "bad" + s + ".example.com";
    f.map.emplace(host, i);
  }
  f.exact = "api" + std::to_string(middle(n, 0)) + ".example.com";
  f.wildcard = "pkg.svc" + std::to_string(middle(n, 1)) + ".example.net";
  f.deny = "bad" + std::to_string(middle(n, 3)) + ".example.com";
  f.miss = "nothing.example.org";
  return cache.emplace(n, std::move(f)).first->second;
}

void Rules(benchmark::internal::Benchmark* b) {
  for (int n : {10, 1000, 10000}) b->Arg(n);
}

void baseline_map_find(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  const std::string_view host = f.exact;
  for (auto _ : state) {
    const std::string key(host);
    auto it = f.map.find(key);
    benchmark::DoNotOptimize(it);
  }
}
BENCHMARK(baseline_map_find)->Apply(Rules);

void check(bool ok, benchmark::State& state, const char* what) {
  if (!ok) state.SkipWithError(what);
}

template <int kWhich>
void match_host(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  const std::string& host = kWhich == 0 ? f.exact : kWhich == 1 ? f.wildcard : kWhich == 2 ? f.deny : f.miss;
  const bool expect_allowed = kWhich < 2;
  check(f.policy->match_host(host).allowed == expect_allowed, state, "unexpected verdict");
  for (auto _ : state) benchmark::DoNotOptimize(f.policy->match_host(host));
}
void match_host_exact(benchmark::State& s) { match_host<0>(s); }
void match_host_wildcard(benchmark::State& s) { match_host<1>(s); }
void match_host_deny(benchmark::State& s) { match_host<2>(s); }
void match_host_miss(benchmark::State& s) { match_host<3>(s); }
BENCHMARK(match_host_exact)->Apply(Rules);
BENCHMARK(match_host_wildcard)->Apply(Rules);
BENCHMARK(match_host_deny)->Apply(Rules);
BENCHMARK(match_host_miss)->Apply(Rules);

template <bool kAllowed>
void match_request(benchmark::State& state) {
  const Fixture& f = fixture(static_cast<int>(state.range(0)));
  const std::string_view path = kAllowed ? "/v1/users/42/orders" : "/admin/users";
  const auto want = kAllowed ? zn::broker::RequestAction::kAllow : zn::broker::RequestAction::kDeny;
  check(f.policy->match_request(f.exact, "GET", path).action == want, state, "unexpected verdict");
  for (auto _ : state) benchmark::DoNotOptimize(f.policy->match_request(f.exact, "GET", path));
}
void match_request_allow(benchmark::State& s) { match_request<true>(s); }
void match_request_deny(benchmark::State& s) { match_request<false>(s); }
BENCHMARK(match_request_allow)->Apply(Rules);
BENCHMARK(match_request_deny)->Apply(Rules);

// HostPattern: validating/normalising a name (what every SNI and DNS query
// pays before a lookup) and parsing a wildcard pattern, vs a lowercase copy.
constexpr std::string_view kName = "Registry.NPMJS.org.";
void baseline_lowercase_copy(benchmark::State& state) {
  for (auto _ : state) {
    std::string s(kName);
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(baseline_lowercase_copy);

void host_pattern_normalize(benchmark::State& state) {
  check(zn::broker::normalize_dns_name(kName) == "registry.npmjs.org", state, "bad normalisation");
  for (auto _ : state) benchmark::DoNotOptimize(zn::broker::normalize_dns_name(kName));
}
BENCHMARK(host_pattern_normalize);

void host_pattern_parse_wildcard(benchmark::State& state) {
  std::string why;
  check(zn::broker::parse_host_pattern("*.NPMJS.org", &why).has_value(), state, "bad pattern");
  for (auto _ : state) benchmark::DoNotOptimize(zn::broker::parse_host_pattern("*.NPMJS.org", &why));
}
BENCHMARK(host_pattern_parse_wildcard);

// PathPattern::matches on a "**" glob vs a plain prefix comparison.
constexpr std::string_view kPath = "/repos/zeroness/zeroness/issues/42/comments";
void baseline_prefix_compare(benchmark::State& state) {
  const std::string prefix = "/repos/";
  for (auto _ : state) {
    std::string_view p = kPath;
    benchmark::DoNotOptimize(p.substr(0, prefix.size()) == prefix);
  }
}
BENCHMARK(baseline_prefix_compare);

void path_pattern_match(benchmark::State& state) {
  std::string why;
  auto glob = zn::broker::PathPattern::parse("/repos/**/issues/*/comments", &why);
  check(glob && glob->matches(kPath), state, "glob does not match");
  if (!glob) return;
  for (auto _ : state) benchmark::DoNotOptimize(glob->matches(kPath));
}
BENCHMARK(path_pattern_match);

}  // namespace

BENCHMARK_MAIN();
