// The intercepting proxy's per-request CPU work: parsing a request head
// (strict HTTP/1.1) and building the forwarded head (framing regenerated,
// credentials replaced, identity injected), each next to a baseline in the
// same binary: finding the end of the head with memmem, and copying it.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "userspace/http1_message.h"
#include "userspace/http_rewrite.h"
#include "userspace/http_target.h"

namespace {

// What curl sends plus what an SDK adds: a typical API request head.
const std::string kHead =
    "POST /v1/charges?expand[]=customer HTTP/1.1\r\n"
    "Host: api.stripe.com\r\n"
    "User-Agent: Stripe/v1 PythonBindings/7.0.0\r\n"
    "Accept: */*\r\n"
    "Accept-Encoding: gzip, deflate\r\n"
    "Authorization: Bearer guest-supplied-placeholder\r\n"
    "Content-Type: application/x-www-form-urlencoded\r\n"
    "Idempotency-Key: 6c1f8f0e-58c5-4a5e-9d1f-0c6a2b7f2e11\r\n"
    "Stripe-Version: 2024-06-20\r\n"
    "X-Stripe-Client-User-Agent: {\"bindings_version\": \"7.0.0\", \"lang\": \"python\"}\r\n"
    "Connection: keep-alive\r\n"
    "Content-Length: 42\r\n"
    "\r\n";

void baseline_find_head_end(benchmark::State& state) {
  for (auto _ : state) {
    const void* end = memmem(kHead.data(), kHead.size(), "\r\n\r\n", 4);
    benchmark::DoNotOptimize(end);
  }
}
BENCHMARK(baseline_find_head_end);

void http_parse_request_head(benchmark::State& state) {
  zn::http::HttpLimits limits;
  zn::http::RequestHead head;
  for (auto _ : state) {
    zn::http::ParseResult r = zn::http::parse_request_head(kHead, limits, head);
    benchmark::DoNotOptimize(r.consumed);
  }
}
BENCHMARK(http_parse_request_head);

void baseline_copy_head(benchmark::State& state) {
  for (auto _ : state) {
    std::string copy = kHead;
    benchmark::DoNotOptimize(copy.data());
  }
}
BENCHMARK(baseline_copy_head);

void http_rewrite_request_head(benchmark::State& state) {
  zn::http::RequestHead head;
  zn::http::parse_request_head(kHead, zn::http::HttpLimits{}, head);
  const auto target = zn::http::normalise_target(head.target);
  const zn::proxy::Injection injection{"Authorization", "Bearer sk_live_bench_0123456789abcdef",
                                       {"Authorization", "Proxy-Authorization"}};
  for (auto _ : state) {
    std::string out = zn::http::forwarded_request_head(head, *target, "api.stripe.com", &injection);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(http_rewrite_request_head);

void http_normalise_target(benchmark::State& state) {
  for (auto _ : state) {
    auto t = zn::http::normalise_target("/v1/customers/%63us_123/./sources/../charges?limit=3");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(http_normalise_target);

}  // namespace

BENCHMARK_MAIN();
