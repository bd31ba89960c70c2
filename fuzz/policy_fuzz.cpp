// libFuzzer target for the policy parser and compiler: arbitrary bytes as a
// policy document must be refused with a PolicyError or compiled, never crash
// or hang; a compiled policy must answer lookups.
//   cmake -S . -B build-fuzz -DZN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build-fuzz --target policy_fuzz
//   build-fuzz/fuzz/policy_fuzz -max_total_time=60 -max_len=4096 CORPUS_DIR
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "broker/policy/compiled.h"
#include "broker/policy/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto policy = zn::broker::CompiledPolicy::compile(zn::broker::parse_policy(text));
    for (const char* host : {"api.github.com", "a.b.example.com", "198.18.0.10", "", "x..y"}) {
      policy->match_host(host);
      policy->match_request(host, "GET", "/repos/a/b");
    }
  } catch (const zn::broker::PolicyError&) {
  }
  return 0;
}
