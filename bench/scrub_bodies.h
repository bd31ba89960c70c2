// The bodies the scrub benchmarks scan (http_bench, hyperscan_bench), and
// the secrets armed against them: the same bytes in both binaries, so their
// figures compare.
#pragma once

#include <cstddef>
#include <iterator>
#include <random>
#include <string>

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

}  // namespace zn::bench
