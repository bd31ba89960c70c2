#include "broker/daemon/zerod_services.h"

namespace zn::broker {

std::vector<ServiceDeclaration> zerod_services() {
  return {
      {"netns", {}, "zerod's network namespace entered, the steering routes installed"},
      {"datapath", {"netns"}, "the TC programs loaded or re-adopted from their pins; the listener ports set"},
      {"host_keys", {"netns"}, "the state directory, the host key and the deployment CA sealed under it"},
      {"audit", {"host_keys"}, "the hash-chained audit log and its writer"},
      {"audit_export", {"audit"}, "the audit's sinks (signed batches) and its retention"},
      {"resolver", {"netns"}, "the configured resolver and the destination guard"},
      {"capabilities", {"audit"}, "the stores of the config and the capability service"},
      {"sessions",
       {"datapath", "host_keys", "audit", "resolver", "capabilities"},
       "the session registry: TAPs, datapath entries, the state file"},
      {"dns_policy", {"sessions", "audit"}, "governed DNS's verdicts and what each session was told"},
      {"approvals", {"audit"}, "held requests, standing grants and the approval webhook"},
      {"proxy_policy",
       {"sessions", "dns_policy", "resolver", "approvals", "capabilities"},
       "the proxy's verdicts, minted identities"},
      {"vms", {"sessions"}, "each session's microVM"},
      {"exposures", {"sessions", "audit"}, "declared guest ports, their listeners and tickets"},
      {"commands", {"sessions", "vms", "audit"}, "signed commands to the agents in the guests"},
      {"participants",
       {"sessions", "audit", "capabilities", "approvals", "proxy_policy", "vms", "exposures"},
       "the parts told of each session's create, update and delete"},
      {"restore",
       {"participants", "host_keys"},
       "the state file's sessions re-adopted, an interrupted key rotation finished, declared ports reopened"},
      {"dns", {"dns_policy", "resolver", "restore"}, "the DNS responder (UDP and TCP) on its loop"},
      {"proxy", {"proxy_policy", "restore"}, "the transparent proxy's loops and workers"},
      {"listener_lookup",
       {"datapath", "dns", "proxy"},
       "the namespace's listener lookup for governed devices: a SYN on a four-tuple still in TIME_WAIT "
       "reaches the proxy's or DNS listener"},
      {"capability_calls",
       {"capabilities", "proxy"},
       "capability calls taken; stopped before the proxy's loops their answers go to"},
      {"drop_events",
       {"datapath", "sessions", "dns_policy", "approvals", "proxy_policy"},
       "the drop-event reader and the once-a-second chores"},
      {"metrics",
       {"sessions", "datapath", "dns", "proxy", "audit_export", "capabilities"},
       "the Prometheus endpoint"},
      {"jwks", {"proxy_policy"}, "the minted identities' public keys"},
      {"control",
       {"sessions", "vms", "exposures", "commands", "approvals", "audit_export", "drop_events", "dns",
        "proxy", "restore"},
       "the control socket and its verbs"},
  };
}

}  // namespace zn::broker
