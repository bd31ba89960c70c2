// The synthetic policy the benchmarks share: a mix like a big deployment,
// rule i by i % 4 — an exact host with methods and paths, a wildcard, an L4
// rule on an address (the part that reaches the BPF trie), a deny.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace zn::bench {

inline std::string make_policy(int rules) {
  nlohmann::json allow = nlohmann::json::array(), deny = nlohmann::json::array();
  for (int i = 0; i < rules; ++i) {
    const std::string n = std::to_string(i);
    switch (i % 4) {
      case 0:
        allow.push_back({{"host", "api" + n + ".example.com"},
                         {"methods", {"GET", "POST"}},
                         {"paths", {"/v1/**", "/repos/*/issues"}}});
        break;
      case 1:
        allow.push_back({{"host", "*.svc" + n + ".example.net"}});
        break;
      case 2:
        allow.push_back({{"host", "198." + std::to_string(18 + (i >> 16) % 2) + "." +
                                      std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255)},
                         {"port", 5432}});
        break;
      default:
        deny.push_back({{"host", "bad" + n + ".example.com"}});
        break;
    }
  }
  return nlohmann::json{{"policy", {{"allow", allow}, {"deny", deny}}}}.dump();
}

}  // namespace zn::bench
