// What the data path's audit record costs the I/O loop that posts it (issue
// 31: no JSON on the loop; issue 32: a record scans its own session's
// secrets). AuditLog::post of an egress:allow record whose detail is built
// on the caller (nlohmann::json, checked, serialised and redacted there: how
// every record was posted before) against the same record with
// AuditEvent::detail_later (a copy of the request's summary handed to the
// writer thread, which builds the rest). The argument: how many other
// sessions hold one secret each (the record's own session holds one); the
// _global variant holds them as daemon-wide secrets instead, every one
// scanned for every record (how every secret was held before). The queue is
// drained between timed spans, so no variant runs into its limit.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "broker/audit/log.h"
#include "support/temp_dir.h"

namespace {

using nlohmann::json;
using zn::broker::AuditEvent;
using zn::broker::AuditLog;

// The fields of an intercepted request's record (proxy::RequestSummary's).
struct Summary {
  std::string session = "agent-7f3c9a2e-session", host = "api.stripe.com", method = "POST",
              path = "/v1/charges?expand[]=customer", identity = "stripe", upstream = "198.18.0.10:443";
  int status = 200;
  uint64_t bytes_up = 812, bytes_down = 2231, duration_ms = 14;
};

json detail_of(const Summary& r) {
  return {{"host", r.host},
          {"method", r.method},
          {"path", r.path},
          {"status", r.status},
          {"mode", "intercept"},
          {"bytes_up", r.bytes_up},
          {"bytes_down", r.bytes_down},
          {"duration_ms", r.duration_ms},
          {"identity", r.identity},
          {"upstream", r.upstream}};
}

struct Fixture {
  Fixture(int64_t others, bool global) {
    zn::broker::AuditLogOptions o;
    o.db_path = dir.file("audit.db");
    o.sink = [](const std::string&) {};
    log = std::make_unique<AuditLog>(std::move(o));
    const Summary summary;
    log->set_session_secrets(summary.session, {"sk_live_own_session_abcdef"});
    for (int64_t i = 0; i < others; ++i) {
      const std::string value = "sk_live_" + std::to_string(1000000 + i) + "abcdef";
      if (global)
        log->add_secret(value);
      else
        log->set_session_secrets("other-" + std::to_string(i), {value});
    }
  }
  zn::test::TempDir dir;
  std::unique_ptr<AuditLog> log;
};

template <typename Post>
void run(benchmark::State& state, Post post, bool global = false) {
  Fixture f(state.range(0), global);
  const Summary summary;
  int64_t n = 0;
  for (auto _ : state) {
    post(*f.log, summary);
    if (++n % 4096 == 0) {
      state.PauseTiming();
      f.log->flush();
      state.ResumeTiming();
    }
  }
  f.log->flush();
  state.counters["rejected"] = static_cast<double>(f.log->stats().rejected);
}

void audit_post_built(benchmark::State& state) {
  run(state, [](AuditLog& log, const Summary& r) { log.post({"egress:allow", r.session, detail_of(r)}); });
}
BENCHMARK(audit_post_built)->Arg(0)->Arg(1000);

void audit_post_built_global(benchmark::State& state) {
  run(
      state,
      [](AuditLog& log, const Summary& r) {
        log.post({"egress:allow", r.session, detail_of(r)});
      },
      true);
}
BENCHMARK(audit_post_built_global)->Arg(1000);

void audit_post_deferred(benchmark::State& state) {
  run(state, [](AuditLog& log, const Summary& summary) {
    auto r = std::make_shared<const Summary>(summary);
    log.post({"egress:allow", r->session, {}, [r] { return detail_of(*r); }});
  });
}
BENCHMARK(audit_post_deferred)->Arg(0)->Arg(1000);

}  // namespace

BENCHMARK_MAIN();
