// zerod's configuration file (JSON), strictly validated like a policy.
#pragma once

#include <cstdint>
#include <map>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "broker/daemon/audit_retention.h"
#include "broker/resources/store_catalog.h"
#include "userspace/proxy/transparent_proxy.h"
#include "vmm/host/guest_network.h"
#include "zn_abi.h"

namespace zn::broker {

// Where zerod POSTs each request held for approval (an HTTP POST of the
// held request as approval.watch shows it, with the redacted preview: never
// a secret), signed so the receiver can trust it: X-Zeroness-Signature:
// t=<unix seconds>,v1=<hex HMAC-SHA256>,ed25519=<hex signature>, each over
// "<t>.<body>" (the parts configured). At least one signature is required.
struct ApprovalWebhookConfig {
  std::string url;  // http:// or https://
  // A 32-byte key (head -c 32 /dev/urandom), mode 0600, owned by zerod's
  // user: refused otherwise. "" = no HMAC.
  std::string hmac_key_file;
  // Ed25519 with zerod's webhook signing key (made on the first start in
  // the host key's directory; `znctl approval webhook-key` shows its public half).
  bool ed25519 = false;
  uint32_t timeout_ms = 5000;  // per attempt; 3 attempts
};

struct DaemonConfig {
  std::string netns;  // enter this named network namespace at start ("" = stay)
  std::string pin_root = "/sys/fs/bpf/zeroness";
  std::string state_dir = "/var/lib/zeroness";
  // The host key resource values are sealed under at rest (0600, made on
  // the first start). Outside state_dir on purpose: a copy of the state
  // directory without it reveals nothing.
  std::string host_key = "/etc/zeroness/host.key";
  // How long a secret's guarded pages stay readable after their last read
  // (GuardedBytes::set_read_linger): one mprotect pair per burst of
  // requests, not per request. 0: no-access at once after every read.
  uint32_t secret_read_linger_ms = 100;
  // Minted identities ("identity": "jwt"): the tokens' "iss", and how long
  // each lives (seconds, 1..3600). Their keys rotate daily; `znctl identity
  // jwks` publishes them.
  std::string jwt_issuer = "zeroness";
  uint32_t jwt_lifetime_s = 60;
  // "jwks_listen": "IPv4:PORT": zerod serves its JWKS there (GET
  // /.well-known/jwks.json, plain HTTP) for upstreams that verify its minted
  // tokens. Port 0 = off.
  std::string jwks_address;
  uint16_t jwks_port = 0;
  std::string control_socket = "/run/zeroness/zerod.sock";
  std::string address_pool_ipv4 = "198.19.0.0/16";
  std::string address_pool_ipv6 = "2001:db8:19::/48";
  // Each session's share of the pools: a /24 and a /64 (the lab's plan, 256
  // sessions), down to a /30 and a /126 (16k sessions from a /16).
  uint32_t guest_prefix_ipv4 = 24, guest_prefix_ipv6 = 64;
  uint16_t proxy_port = ZN_DEFAULT_PROXY_PORT;
  uint16_t dns_port = ZN_DEFAULT_DNS_PORT;
  // Static name -> addresses answers (the lab's stand-in internet) ...
  std::map<std::string, std::vector<std::string>> dns_static;
  // ... and upstream resolvers for everything else ("198.18.0.53" or "[::1]:5353").
  std::vector<std::string> dns_upstream;
  uint32_t drop_event_rate = ZN_DEFAULT_EVENT_RATE, drop_event_burst = ZN_DEFAULT_EVENT_BURST;
  // dns:unanswered records naming their own name, per session per second
  // (past it they are summed per parent domain); answers remembered per
  // session for the proxy's pinning (least recently used go first).
  uint32_t dns_unanswered_rate = 20;
  uint32_t dns_answers_per_session = 4096;
  // Each session's share of the resolver (issue 32): its queries waiting
  // for an upstream answer at once, and its queries per second (burst).
  uint32_t dns_pending_per_session = 64;
  // A session's DNS-over-TCP connections at once (of the responder's 64).
  uint32_t dns_tcp_per_session = 8;
  uint32_t dns_queries_per_second = ZN_DEFAULT_DNS_RATE, dns_query_burst = ZN_DEFAULT_DNS_BURST;
  // How the datapath programs attach to each TAP: "clsact" (a qdisc and
  // filters; the default, measured faster to create and delete) or "tcx"
  // (Linux 6.6+; tc_attachment.h says why it is not the default).
  std::string tc_attach = "clsact";
  uint16_t metrics_port = 9464;  // Prometheus text on 127.0.0.1; 0 = off
  uint32_t proxy_idle_timeout_ms =
      proxy::kDefaultIdleTimeout.count();  // relayed connections idle this long are closed
  uint32_t proxy_header_timeout_ms =
      proxy::kDefaultHeaderTimeout.count();  // a started request head must complete in this
  // Guest connections through the proxy in all; and per guest (its
  // session): its connections and the upstream sockets opened for them.
  uint32_t proxy_max_connections = 4096;
  uint32_t proxy_max_connections_per_guest = 256;
  // true: passthrough relayed by the kernel's sockmap where it loads; false
  // (default): splice(2) through the proxy's loop, measured twice as fast on
  // these machines (see ProxyConfig::kernel_splice).
  bool proxy_kernel_splice = false;
  // Intercepted TLS offers HTTP/2 to guests (ProxyConfig::http2).
  bool proxy_http2 = true;
  bool proxy_upstream_http2 = true;  // offer h2 to TLS upstreams
  // Guests may resume their TLS sessions (ProxyConfig::guest_tls_resumption).
  bool proxy_tls_resumption = true;
  // A WebSocket a rule allowed ("websocket": true): its largest message
  // either way, and its idle bound (no byte either way).
  uint32_t proxy_websocket_idle_timeout_ms = 300000;
  uint32_t proxy_websocket_max_message = 16 * 1024 * 1024;
  // The capability service's threads (store calls at once) and how many of
  // them one session's calls may hold (issue 32: the rest are the others').
  uint32_t capability_threads = 8, capability_calls_per_session = 3;
  // The proxy's workers (broker decisions, upstream resolutions, leaf
  // minting) and how many one session's jobs may hold at once.
  uint32_t proxy_workers = 8, proxy_workers_per_session = 2;
  uint32_t approval_timeout_ms = 120000;    // a request held for approval ("ask") is denied after this
  uint32_t approval_held_per_session = 32;  // past it a session's next "ask" is 429 at once
  // The longest standing approval `znctl approval allow --for` may grant.
  uint32_t approval_grant_max_s = 24 * 3600;
  // Declared ports (znctl session expose): the address zerod's listeners
  // bind (the host side; never a guest's link), a ticket's default life, and
  // how long a redeemed ticket binds its client (cookie and connection).
  std::string expose_address = "127.0.0.1";
  uint32_t expose_ticket_ttl_s = 300;
  uint32_t expose_binding_s = 600;
  uint32_t expose_head_timeout_ms = 10000;  // a client's first request head (ticket mode)
  // Refusals a client of the ticket ports gets one by one (then 429, summarised).
  uint32_t expose_refusal_burst = 20;
  uint32_t expose_refusals_per_minute = 60;
  // The in-sandbox agent's TCP port (issue 15): zerod's signed commands
  // reach it, and nothing else does; 0: no command channel.
  uint32_t agent_port = 7070;
  // The static zn-agent a microVM is given ("" = the one installed beside
  // zerod: <zerod's dir>/zn-agent, ../zn-agent/zn-agent in a build tree,
  // /usr/lib/zeroness/zn-agent). None found: VMs boot without an agent.
  std::string agent_binary;
  // zerod's command signing key (Ed25519 seed, beside the host key).
  std::string command_signing_key() const;
  // The seed each session's agent result key is derived from (32 random
  // bytes, 0600, beside the host key; never rotated with the command key,
  // which travels to agents in the clear).
  std::string command_result_root() const;
  std::optional<ApprovalWebhookConfig> approval_webhook;
  // PEM bundle trusted for upstream TLS on top of the system store (the
  // lab's CA); "" = system store only.
  std::string upstream_ca_bundle;
  // Destinations the proxy may reach although they are refused by default
  // (special-purpose ranges such as the lab's 198.18.0.0/16). Only the
  // operator's config can name them, never a guest-facing policy. A prefix
  // opens the host's own addresses or a guest pool only when it lies inside
  // that local prefix or pool (e.g. "198.18.255.1/32"), never by covering it.
  std::vector<std::string> upstream_allow;  // "198.18.0.0/16", "2001:db8:18::/48"
  // A NAT64 prefix (a /96, e.g. "64:ff9b::/96"): addresses in it are judged
  // as the IPv4 address they carry. "" = NAT64 addresses are refused.
  std::string nat64_prefix;
  // Capability-scoped resources (issue 13): the backing stores a policy's
  // "caps" may name (by kind and name; KV and queue "default" live in
  // state_dir unless named), and the addresses cap.zeroness.internal
  // resolves to for guests (their port 443 is steered to the proxy like any
  // other; outside the pools). Empty: the name is not answered.
  StoreCatalog stores;
  // MicroVMs (issue 14): each runs as uid vm_uid_base + its session's slot
  // (and that gid), none of them a user of this host; "vm_accel": "auto"
  // (KVM when a probe boots the guest with it, else TCG), "kvm" or "tcg";
  // the probe's verdicts are kept in vm_cache_dir; "vm_qemu": the binary
  // ("" = qemu-system-x86_64 from PATH).
  uint32_t vm_uid_base = 0x7a6e0000;
  std::string vm_accel = "auto";
  std::string vm_cache_dir = "/var/cache/zeroness";
  std::string vm_qemu;
  std::vector<std::string> capability_addresses = {"203.0.113.253", "2001:db8:ca9::1"};
  // Audit export (issue 16): the sinks ("file", "syslog", "http", "nats"),
  // checked at parse time (audit_export_service.h), and this host's name in
  // what they receive ("" = the kernel's host name).
  nlohmann::json audit_sinks = nlohmann::json::array();
  std::string audit_host;
  // Retention of the local store ("audit_retention"); no limits = keep all.
  AuditRetentionOptions audit_retention;
  // The audit writer's group commit (AuditLogOptions::gather): while
  // records keep coming, they gather this long into one transaction.
  uint32_t audit_gather_ms = 10;
  // zerod's audit signing key (Ed25519 seed, beside the host key): seals
  // every exported batch.
  std::string audit_signing_key() const;

  // The pools and per-guest prefixes as the registry's address plan (the
  // destination guard refuses the same pools); valid once parsed.
  vmm::AddressPlan address_plan() const {
    return vmm::AddressPlan::parse(address_pool_ipv4, address_pool_ipv6, guest_prefix_ipv4,
                                   guest_prefix_ipv6);
  }
  std::string state_file() const { return state_dir + "/sessions.json"; }
  std::string audit_db() const { return state_dir + "/audit.db"; }
  // The webhook's Ed25519 signing key: beside the host key (outside state_dir).
  std::string webhook_signing_key() const;
};

// Throws PolicyError (with the JSON path) on a bad file.
DaemonConfig parse_daemon_config(const std::string& json_text);
DaemonConfig load_daemon_config(const std::string& path);  // also throws std::runtime_error

}  // namespace zn::broker
