#include "broker/control/metrics.h"

#include "userspace/datapath/verdict_names.h"

namespace zn::broker {

std::string prometheus_line(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& labels, uint64_t value) {
  std::string out = name;
  if (!labels.empty()) {
    out += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out += ",";
      out += labels[i].first + "=\"";
      for (char c : labels[i].second) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
          out += "\\n";
          continue;
        }
        out += c;
      }
      out += "\"";
    }
    out += "}";
  }
  return out + " " + std::to_string(value) + "\n";
}

MetricsSnapshot read_metrics(const SessionRegistry& registry, const dp::DatapathMaps& maps,
                             const dns::Responder& dns, const SessionDnsPolicy& dns_policy,
                             const proxy::TransparentProxy& proxy, const AuditLog& audit,
                             const CapabilityService* capabilities) {
  MetricsSnapshot m;
  for (const SessionPtr& s : registry.list())
    m.sessions.push_back({s->record.id, maps.counters(s->record.session_idx)});
  m.dns = dns.counters();
  m.dns_answers_evicted = dns_policy.answers_evicted();
  m.connections = proxy.counters();
  m.requests = proxy.request_counters();
  m.audit = audit.stats();
  if (capabilities) m.capability_calls = capabilities->counts();
  return m;
}

std::string render_metrics(const MetricsSnapshot& m) {
  std::string out;
  out += "# HELP zn_sessions Sessions zerod governs.\n# TYPE zn_sessions gauge\n";
  out += prometheus_line("zn_sessions", {}, m.sessions.size());
  out +=
      "# HELP zn_datapath_packets_total Packets judged by the TAP datapath, per session and verdict.\n"
      "# TYPE zn_datapath_packets_total counter\n";
  for (const MetricsSnapshot::SessionVerdicts& s : m.sessions) {
    for (unsigned v = 0; v < ZN_VERDICT_COUNT; ++v)
      if (s.counters[v])
        out += prometheus_line("zn_datapath_packets_total",
                               {{"session", s.id}, {"verdict", std::string(dp::verdict_name(v))}},
                               s.counters[v]);
  }
  // A family's lines together, after its HELP and TYPE (the text format
  // allows no interleaving).
  out +=
      "# HELP zn_datapath_events_suppressed_total Datapath events not posted to the audit (over the "
      "session's event rate), per session.\n"
      "# TYPE zn_datapath_events_suppressed_total counter\n";
  for (const MetricsSnapshot::SessionVerdicts& s : m.sessions)
    out += prometheus_line("zn_datapath_events_suppressed_total", {{"session", s.id}},
                           s.counters[ZN_STAT_EVENTS_SUPPRESSED]);
  // Each family shows the counters its list gives an outcome, in list order.
  out += "# HELP zn_dns_queries_total Guest DNS queries by outcome.\n# TYPE zn_dns_queries_total counter\n";
  dns::for_each_counter(m.dns, [&](const dns::CounterInfo& c, uint64_t n) {
    if (!c.outcome.empty())
      out += prometheus_line("zn_dns_queries_total", {{"result", std::string(c.outcome)}}, n);
  });
  out +=
      "# HELP zn_dns_answers_evicted_total Live DNS answers a session's guest was told, forgotten to make "
      "room for newer ones (dns_answers_per_session): a connection to such a name is refused until it is "
      "resolved again.\n"
      "# TYPE zn_dns_answers_evicted_total counter\n";
  out += prometheus_line("zn_dns_answers_evicted_total", {}, m.dns_answers_evicted);
  out +=
      "# HELP zn_proxy_connections_total Steered guest connections by outcome.\n"
      "# TYPE zn_proxy_connections_total counter\n";
  proxy::for_each_counter(m.connections, [&](const proxy::CounterInfo& c, uint64_t n) {
    if (!c.outcome.empty())
      out += prometheus_line("zn_proxy_connections_total", {{"result", std::string(c.outcome)}}, n);
  });
  out +=
      "# HELP zn_proxy_requests_total Intercepted HTTP requests by outcome.\n"
      "# TYPE zn_proxy_requests_total counter\n";
  proxy::for_each_counter(m.requests, [&](const proxy::CounterInfo& c, uint64_t n) {
    if (c.outcome.empty()) return;
    // This result has always counted the spliced connections whose upstream
    // could not be connected too (they have no result of their own).
    if (c.name == "upstream_failures") n += m.connections.upstream_failures;
    out += prometheus_line("zn_proxy_requests_total", {{"result", std::string(c.outcome)}}, n);
  });
  out +=
      "# HELP zn_audit_queued Audit records accepted and not yet committed.\n"
      "# TYPE zn_audit_queued gauge\n";
  out += prometheus_line("zn_audit_queued", {}, m.audit.queued);
  out +=
      "# HELP zn_audit_records_total Audit records committed, and refused for a full queue (lost).\n"
      "# TYPE zn_audit_records_total counter\n";
  out += prometheus_line("zn_audit_records_total", {{"result", "committed"}}, m.audit.committed);
  out += prometheus_line("zn_audit_records_total", {{"result", "rejected"}}, m.audit.rejected);
  out +=
      "# HELP zn_audit_commit_failures_total Failed audit commits (each retry counts).\n"
      "# TYPE zn_audit_commit_failures_total counter\n";
  out += prometheus_line("zn_audit_commit_failures_total", {}, m.audit.failed_commits);
  out +=
      "# HELP zn_audit_failing 1 while the audit's last commit failed: new crossings are refused.\n"
      "# TYPE zn_audit_failing gauge\n";
  out += prometheus_line("zn_audit_failing", {}, m.audit.failing ? 1 : 0);
  out +=
      "# HELP zn_audit_secrets_held Secret values the audit redacts (daemon-wide and every live session's).\n"
      "# TYPE zn_audit_secrets_held gauge\n";
  out += prometheus_line("zn_audit_secrets_held", {}, m.audit.secrets_held);
  out +=
      "# HELP zn_secret_alarms_total Secret alarms raised: canary (a planted fake credential in egress), "
      "misuse (a placeholder headed for a host its rule does not name), reflected (an upstream echoed an "
      "injected credential).\n"
      "# TYPE zn_secret_alarms_total counter\n";
  out += prometheus_line("zn_secret_alarms_total", {{"event", "secret:canary"}}, m.audit.secret_canary);
  out += prometheus_line("zn_secret_alarms_total", {{"event", "secret:misuse"}}, m.audit.secret_misuse);
  out += prometheus_line("zn_secret_alarms_total", {{"event", "secret:reflected"}}, m.audit.secret_reflected);
  out +=
      "# HELP zn_audit_commit_max_microseconds The longest audit commit (one fsync) so far.\n"
      "# TYPE zn_audit_commit_max_microseconds gauge\n";
  out += prometheus_line("zn_audit_commit_max_microseconds", {},
                         static_cast<uint64_t>(m.audit.max_commit_latency.count()));
  out +=
      "# HELP zn_capability_calls Capability calls waiting for a worker (their session's turn, their store's "
      "share) or running.\n"
      "# TYPE zn_capability_calls gauge\n";
  out += prometheus_line("zn_capability_calls", {{"state", "queued"}}, m.capability_calls.queued);
  out += prometheus_line("zn_capability_calls", {{"state", "running"}}, m.capability_calls.running);
  return out;
}

}  // namespace zn::broker
