// What the scrub benchmarks of http_bench and hyperscan_bench share: the
// bodies they scan, the secrets armed against them, and the scrubber's own
// run over them (16 KiB reads, as the relay feeds it), so that the figures
// of the two binaries compare.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <string_view>

#include "userspace/proxy/secret_scrubber.h"

namespace zn::bench {

// A JSON API response of 64 KiB (as an echoing upstream or a list endpoint
// sends), with one reflected secret per 8 KiB, so replacements are counted
// in the cost.
inline constexpr size_t kBodySize = 64 * 1024;

inline std::string secret_for(size_t i) {
  return "sk_live_bench_" + std::to_string(i) + "_0123456789abcdefXYZ";
}

inline const std::string& response_body() {
  static const std::string body = [] {
    std::mt19937 rng(42);
    std::string b;
    const char* words[] = {"\"id\": ",
                           "\"object\": \"charge\", ",
                           "\"amount\": 500, ",
                           "\"currency\": \"usd\", ",
                           "\"description\": \"Order 1234/5\", ",
                           "\"metadata\": {}, ",
                           "\"livemode\": false, ",
                           "\"created\": 1700000000, ",
                           "\"status\": \"succeeded\"}, {"};
    size_t next_secret = 8192;
    while (b.size() < kBodySize) {
      b += words[rng() % std::size(words)];
      if (b.size() >= next_secret) {
        b += "\"echo\": \"Bearer " + secret_for(0) + "\", ";
        next_secret += 8192;
      }
    }
    b.resize(kBodySize);
    return b;
  }();
  return body;
}

// 64 KiB of random bytes (the interception bench's /64k): an escape lead,
// NUL or line break every ~40 bytes.
inline const std::string& random_body() {
  static const std::string body = [] {
    std::mt19937 rng(64);
    std::string b(64 * 1024, '\0');
    for (char& c : b) c = static_cast<char>(rng());
    return b;
  }();
  return body;
}

// 64 KiB of zeros (the interception bench's bulk download, a sparse file):
// every byte is one a canonical view drops.
inline const std::string& zero_body() {
  static const std::string body(64 * 1024, '\0');
  return body;
}

// The relay's read size.
inline constexpr size_t kScrubRead = 16384;

// As the relay feeds it: kScrubRead reads, one stream per response; the
// matches it reported.
inline uint64_t scrub_in_reads(const zn::proxy::SecretScrubber& scrubber, const std::string& body,
                               std::string& out) {
  out.clear();
  zn::proxy::SecretScrubber::Stream stream(scrubber);
  for (size_t at = 0; at < body.size(); at += kScrubRead)
    stream.feed(std::string_view(body).substr(at, kScrubRead), out);
  stream.finish(out);
  return stream.report().matches;
}

// The scrubber armed with state.range(0) secrets over `body`, per iteration.
inline void run_scrub(benchmark::State& state, const std::string& body) {
  zn::proxy::SecretScrubber scrubber;
  for (int64_t i = 0; i < state.range(0); ++i)
    scrubber.add_secret(secret_for(static_cast<size_t>(i)), "bench");
  std::string out;
  out.reserve(body.size());
  uint64_t matches = 0;
  for (auto _ : state) {
    matches = scrub_in_reads(scrubber, body, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["patterns"] = static_cast<double>(scrubber.patterns());
  state.counters["states"] = static_cast<double>(scrubber.states());
  state.counters["matches"] = static_cast<double>(matches);
}

}  // namespace zn::bench
