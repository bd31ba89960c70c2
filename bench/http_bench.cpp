// The intercepting proxy's per-request CPU work: parsing a request head
// (strict HTTP/1.1) and building the forwarded head (framing regenerated,
// credentials replaced, identity injected), each next to a baseline in the
// same binary: finding the end of the head with memmem, and copying it.
// And the reflected-secret scrubber over a 64 KiB response body with N
// secrets armed (each byte through the as-sent view and the two canonical
// views of secret_scrubber.h), and the request screen over the same body
// with N canaries, next to a memcpy of the same bytes (their floor: the
// relay copies each byte once anyway).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "userspace/http/message.h"
#include "userspace/http/rewrite.h"
#include "userspace/http/target.h"
#include "userspace/proxy/request_screen.h"
#include "scrub_bench.h"

namespace {

using zn::bench::random_body;
using zn::bench::response_body;

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
  const zn::http::Injection injection{
      "Authorization", "Bearer sk_live_bench_0123456789abcdef", {"Authorization", "Proxy-Authorization"}};
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

void baseline_memcpy_body(benchmark::State& state) {
  const std::string& body = response_body();
  std::string out(body.size(), '\0');
  for (auto _ : state) {
    std::memcpy(out.data(), body.data(), body.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(baseline_memcpy_body);

void scrub_response_body(benchmark::State& state) { zn::bench::run_scrub(state, response_body()); }
BENCHMARK(scrub_response_body)->Arg(1)->Arg(4)->Arg(16);

// The same over 64 KiB of random bytes (the interception bench's /64k): an
// escape lead, NUL or line break every ~40 bytes.
void scrub_random_body(benchmark::State& state) { zn::bench::run_scrub(state, random_body()); }
BENCHMARK(scrub_random_body)->Arg(1)->Arg(16);

void scrub_zero_body(benchmark::State& state) { zn::bench::run_scrub(state, zn::bench::zero_body()); }
BENCHMARK(scrub_zero_body)->Arg(1);

// The request side: a 64 KiB body streamed through the tripwire screen
// with N canaries armed, in 16 KiB reads (no canary in it: it all goes on).
void screen_request_body(benchmark::State& state) {
  const std::string& body = response_body();
  zn::proxy::RequestScreen screen;
  std::vector<zn::proxy::Tripwire> canaries;
  for (int64_t i = 0; i < state.range(0); ++i)
    canaries.push_back({"AKIA_bench_canary_" + std::to_string(i) + "_QWERTY", "canary"});
  screen.arm(canaries);
  std::string out;
  out.reserve(body.size());
  for (auto _ : state) {
    out.clear();
    zn::proxy::StreamScreen stream(screen, {});
    for (size_t at = 0; at < body.size(); at += zn::bench::kScrubRead)
      if (!stream.feed(std::string_view(body).substr(at, zn::bench::kScrubRead), out).empty())
        state.SkipWithError("hit");
    if (!stream.finish(out).empty()) state.SkipWithError("hit");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(screen_request_body)->Arg(1)->Arg(4)->Arg(16);

}  // namespace

BENCHMARK_MAIN();
