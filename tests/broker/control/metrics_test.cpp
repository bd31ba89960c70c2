// zerod's Prometheus text, byte for byte. The expected text is what zerod
// served before the counters were declared as lists (issue 10): scrapers and
// dashboards key on these names, labels and their order.
#include "broker/control/metrics.h"

#include <gtest/gtest.h>

#include "broker/control/counter_values.h"

namespace zn::broker::test {
namespace {

MetricsSnapshot snapshot() {
  MetricsSnapshot m;
  MetricsSnapshot::SessionVerdicts a{"user-1", {}};
  a.counters[ZN_PASS_DNS] = 13;
  a.counters[ZN_PASS_STEER] = 45;
  a.counters[ZN_DROP_TCP_PORT] = 1;
  a.counters[ZN_STAT_EVENTS_SUPPRESSED] = 7;
  m.sessions.push_back(a);
  m.sessions.push_back({"idle", {}});
  m.dns = dns_values();
  m.dns_answers_evicted = 109;
  m.connections = connection_values();
  m.requests = request_values();
  m.audit.queued = 401;
  m.audit.committed = 402;
  m.audit.rejected = 403;
  m.audit.failed_commits = 404;
  m.audit.failing = true;
  m.audit.max_commit_latency = std::chrono::microseconds(405);
  m.audit.secret_canary = 406;
  m.audit.secret_misuse = 407;
  m.audit.secret_reflected = 408;
  m.audit.secrets_held = 409;
  m.capability_calls = {3, 2};
  return m;
}

TEST(Metrics, TextIsUnchanged) {
  EXPECT_EQ(
      render_metrics(snapshot()),
      "# HELP zn_sessions Sessions zerod governs.\n"
      "# TYPE zn_sessions gauge\n"
      "zn_sessions 2\n"
      "# HELP zn_datapath_packets_total Packets judged by the TAP datapath, per session and verdict.\n"
      "# TYPE zn_datapath_packets_total counter\n"
      "zn_datapath_packets_total{session=\"user-1\",verdict=\"pass:dns\"} 13\n"
      "zn_datapath_packets_total{session=\"user-1\",verdict=\"pass:steer\"} 45\n"
      "zn_datapath_packets_total{session=\"user-1\",verdict=\"drop:tcp_port\"} 1\n"
      "# HELP zn_datapath_events_suppressed_total Datapath events not posted to the audit (over the "
      "session's event rate), per session.\n"
      "# TYPE zn_datapath_events_suppressed_total counter\n"
      "zn_datapath_events_suppressed_total{session=\"user-1\"} 7\n"
      "zn_datapath_events_suppressed_total{session=\"idle\"} 0\n"
      "# HELP zn_dns_queries_total Guest DNS queries by outcome.\n"
      "# TYPE zn_dns_queries_total counter\n"
      "zn_dns_queries_total{result=\"allowed\"} 102\n"
      "zn_dns_queries_total{result=\"denied\"} 103\n"
      "zn_dns_queries_total{result=\"refused\"} 104\n"
      "zn_dns_queries_total{result=\"malformed\"} 105\n"
      "zn_dns_queries_total{result=\"upstream_failure\"} 107\n"
      "zn_dns_queries_total{result=\"rate_limited\"} 111\n"
      "zn_dns_queries_total{result=\"session_busy\"} 112\n"
      "# HELP zn_dns_answers_evicted_total Live DNS answers a session's guest was told, forgotten to make "
      "room for newer ones (dns_answers_per_session): a connection to such a name is refused until it is "
      "resolved again.\n"
      "# TYPE zn_dns_answers_evicted_total counter\n"
      "zn_dns_answers_evicted_total 109\n"
      "# HELP zn_proxy_connections_total Steered guest connections by outcome.\n"
      "# TYPE zn_proxy_connections_total counter\n"
      "zn_proxy_connections_total{result=\"accepted\"} 201\n"
      "zn_proxy_connections_total{result=\"spliced\"} 202\n"
      "zn_proxy_connections_total{result=\"intercepted\"} 208\n"
      "zn_proxy_connections_total{result=\"reset\"} 203\n"
      "zn_proxy_connections_total{result=\"hello_timeout\"} 204\n"
      "zn_proxy_connections_total{result=\"tls_handshake_failure\"} 209\n"
      "zn_proxy_connections_total{result=\"busy\"} 206\n"
      "zn_proxy_connections_total{result=\"guest_cap\"} 210\n"
      "zn_proxy_connections_total{result=\"idle_closed\"} 207\n"
      "zn_proxy_connections_total{result=\"accept_error\"} 211\n"
      "zn_proxy_connections_total{result=\"mint_budget\"} 212\n"
      "zn_proxy_connections_total{result=\"workers_busy\"} 214\n"
      "zn_proxy_connections_total{result=\"kernel_spliced\"} 213\n"
      "# HELP zn_proxy_requests_total Intercepted HTTP requests by outcome.\n"
      "# TYPE zn_proxy_requests_total counter\n"
      "zn_proxy_requests_total{result=\"allowed\"} 302\n"
      "zn_proxy_requests_total{result=\"denied\"} 303\n"
      "zn_proxy_requests_total{result=\"malformed\"} 305\n"
      // Spliced connections' failed connects (205) are counted here too.
      "zn_proxy_requests_total{result=\"upstream_failure\"} 509\n"
      "zn_proxy_requests_total{result=\"guest_cancelled\"} 0\n"
      "zn_proxy_requests_total{result=\"h2_limit\"} 306\n"
      "zn_proxy_requests_total{result=\"session_cap\"} 310\n"
      "# HELP zn_audit_queued Audit records accepted and not yet committed.\n"
      "# TYPE zn_audit_queued gauge\n"
      "zn_audit_queued 401\n"
      "# HELP zn_audit_records_total Audit records committed, and refused for a full queue (lost).\n"
      "# TYPE zn_audit_records_total counter\n"
      "zn_audit_records_total{result=\"committed\"} 402\n"
      "zn_audit_records_total{result=\"rejected\"} 403\n"
      "# HELP zn_audit_commit_failures_total Failed audit commits (each retry counts).\n"
      "# TYPE zn_audit_commit_failures_total counter\n"
      "zn_audit_commit_failures_total 404\n"
      "# HELP zn_audit_failing 1 while the audit's last commit failed: new crossings are refused.\n"
      "# TYPE zn_audit_failing gauge\n"
      "zn_audit_failing 1\n"
      "# HELP zn_audit_secrets_held Secret values the audit redacts (daemon-wide and every live session's).\n"
      "# TYPE zn_audit_secrets_held gauge\n"
      "zn_audit_secrets_held 409\n"
      "# HELP zn_secret_alarms_total Secret alarms raised: canary (a planted fake credential in egress), "
      "misuse (a placeholder headed for a host its rule does not name), reflected (an upstream echoed an "
      "injected credential).\n"
      "# TYPE zn_secret_alarms_total counter\n"
      "zn_secret_alarms_total{event=\"secret:canary\"} 406\n"
      "zn_secret_alarms_total{event=\"secret:misuse\"} 407\n"
      "zn_secret_alarms_total{event=\"secret:reflected\"} 408\n"
      "# HELP zn_audit_commit_max_microseconds The longest audit commit (one fsync) so far.\n"
      "# TYPE zn_audit_commit_max_microseconds gauge\n"
      "zn_audit_commit_max_microseconds 405\n"
      "# HELP zn_capability_calls Capability calls waiting for a worker (their session's turn, their store's "
      "share) or running.\n"
      "# TYPE zn_capability_calls gauge\n"
      "zn_capability_calls{state=\"queued\"} 3\n"
      "zn_capability_calls{state=\"running\"} 2\n");
}

TEST(Metrics, NoSessionsStillShowsEveryFamily) {
  MetricsSnapshot m;
  const std::string text = render_metrics(m);
  EXPECT_NE(text.find("zn_sessions 0\n# HELP zn_datapath_packets_total"), std::string::npos) << text;
  EXPECT_EQ(text.find("zn_datapath_events_suppressed_total{"), std::string::npos) << text;
  EXPECT_NE(text.find("zn_dns_queries_total{result=\"allowed\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("zn_proxy_requests_total{result=\"upstream_failure\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("zn_audit_failing 0\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace zn::broker::test
