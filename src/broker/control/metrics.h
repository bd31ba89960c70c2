// zerod's metrics in the Prometheus text format: the sessions, each
// session's datapath verdicts, the DNS responder's and the proxy's outcomes,
// the audit's backlog and failures (an alert's signal: while the audit
// cannot record, crossings are refused).
// Read into plain values first (read_metrics), then rendered by a pure
// function, so the text depends only on what was counted.
#pragma once

#include <string>
#include <vector>

#include "broker/audit/log.h"
#include "broker/session/capability_service.h"
#include "broker/session/dns.h"
#include "broker/session/registry.h"
#include "userspace/datapath/maps.h"
#include "userspace/dns/counters.h"
#include "userspace/dns/responder.h"
#include "userspace/proxy/counters.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::broker {

// "name{label="value",...} number\n" with label values escaped.
std::string prometheus_line(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& labels, uint64_t value);

// What one scrape shows.
struct MetricsSnapshot {
  struct SessionVerdicts {
    std::string id;
    dp::SessionCounters counters;  // by verdict, plus ZN_STAT_EVENTS_SUPPRESSED
  };
  std::vector<SessionVerdicts> sessions;
  dns::DnsCountersSnapshot dns;
  uint64_t dns_answers_evicted = 0;  // SessionDnsPolicy::answers_evicted
  proxy::ProxyCountersSnapshot connections;
  proxy::InterceptCountersSnapshot requests;
  AuditLogStats audit;
  CapabilityCallCounts capability_calls;
};

// Reads the session list, each session's counters in the maps and the
// loops' counters. Blocks briefly (registry lock, map syscalls): the metrics
// server's thread or a control client's, never an I/O loop.
MetricsSnapshot read_metrics(const SessionRegistry& registry, const dp::DatapathMaps& maps,
                             const dns::Responder& dns, const SessionDnsPolicy& dns_policy,
                             const proxy::TransparentProxy& proxy, const AuditLog& audit,
                             const CapabilityService* capabilities = nullptr);

// The text GET /metrics answers. Pure; any thread.
std::string render_metrics(const MetricsSnapshot& m);

}  // namespace zn::broker
