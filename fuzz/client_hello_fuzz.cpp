// libFuzzer target: arbitrary bytes into zn::proxy::peek_client_hello.
//
// Build (clang only; the rest of the tree need not be built with clang):
//   cmake -S . -B build-fuzz -DZN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build-fuzz --target client_hello_fuzz
// or directly:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc \
//     fuzz/client_hello_fuzz.cpp src/userspace/tls/client_hello.cpp -lssl -lcrypto \
//     -o client_hello_fuzz
// Run (a corpus directory is optional; -max_total_time bounds the run):
//   mkdir -p /tmp/ch_corpus && ./client_hello_fuzz -max_total_time=60 /tmp/ch_corpus
//
// Besides "no crash / no sanitizer report", it checks the result's invariants.
#include "userspace/tls/client_hello.h"

#include <openssl/err.h>

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using zn::proxy::HelloStatus;
  const auto info = zn::proxy::peek_client_hello({data, size});
  if (info.status == HelloStatus::kOk) {
    if (info.record_bytes == 0 || info.record_bytes > size) std::abort();
    if (info.sni) {
      if (info.sni->empty() || info.sni->size() > 255) std::abort();
      for (char c : *info.sni)
        if (c >= 'A' && c <= 'Z') std::abort();
    }
    for (const auto& p : info.alpn)
      if (p.empty()) std::abort();
  } else if (info.sni || !info.alpn.empty()) {
    std::abort();  // fields are only set with kOk
  }
  if (ERR_peek_error() != 0) std::abort();  // error queue left clean
  return 0;
}
