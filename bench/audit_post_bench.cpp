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

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

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

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// What the writer costs per record under a steady stream: deferred records
// posted at a rate for a second, the process's CPU time over it per record
// (the poster's share is small and the same in every variant) and records
// per transaction. The arguments: AuditLogOptions::gather in microseconds
// (0: each commit takes what queued while the last one ran) and records per
// millisecond (9: the interception bench's /small; 2: its /64k, where a
// commit's own cost, ~350 us, is spread over fewer records).
void audit_writer_steady(benchmark::State& state) {
  zn::test::TempDir dir;
  zn::broker::AuditLogOptions o;
  o.db_path = dir.file("audit.db");
  o.sink = [](const std::string&) {};
  o.gather = std::chrono::microseconds(state.range(0));
  AuditLog log(std::move(o));
  const Summary summary;
  const int per_ms = static_cast<int>(state.range(1));
  uint64_t records = 0;
  double cpu = 0;
  for (auto _ : state) {
    const double c0 = cpu_seconds();
    auto next = std::chrono::steady_clock::now();
    for (int ms = 0; ms < 1000; ++ms) {
      for (int i = 0; i < per_ms; ++i) {
        auto r = std::make_shared<const Summary>(summary);
        log.post({"egress:allow", r->session, {}, [r] { return detail_of(*r); }});
      }
      next += std::chrono::milliseconds(1);
      std::this_thread::sleep_until(next);
    }
    log.flush();
    cpu += cpu_seconds() - c0;
    records += 1000 * static_cast<uint64_t>(per_ms);
  }
  const zn::broker::AuditLogStats st = log.stats();
  state.counters["cpu_us_per_record"] = cpu * 1e6 / static_cast<double>(records);
  state.counters["records_per_commit"] =
      static_cast<double>(st.committed) / static_cast<double>(std::max<uint64_t>(st.batches, 1));
}
BENCHMARK(audit_writer_steady)
    ->Args({0, 9})
    ->Args({2000, 9})
    ->Args({5000, 9})
    ->Args({10000, 9})
    ->Args({2000, 2})
    ->Args({5000, 2})
    ->Args({10000, 2})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
