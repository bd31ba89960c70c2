#include "broker/daemon/config.h"

#include <arpa/inet.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "broker/daemon/audit_export_service.h"
#include "broker/daemon/store_config.h"
#include "broker/policy/host_pattern.h"
#include "broker/policy/parser.h"
#include "userspace/proxy/destination_class.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw PolicyError(path, message);
}

std::string get_string(const json& obj, const char* key, const std::string& fallback,
                       const std::string& at = "$") {
  if (!obj.contains(key)) return fallback;
  if (!obj[key].is_string()) fail(at + "." + key, "must be a string");
  return obj[key].get<std::string>();
}

uint32_t get_uint(const json& obj, const char* key, uint32_t fallback, uint32_t min, uint32_t max) {
  if (!obj.contains(key)) return fallback;
  const json& v = obj[key];
  if (!v.is_number_unsigned() || v.get<uint64_t>() < min || v.get<uint64_t>() > max)
    fail(std::string("$.") + key,
         "must be an integer between " + std::to_string(min) + " and " + std::to_string(max));
  return v.get<uint32_t>();
}

bool is_address(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

ApprovalWebhookConfig parse_webhook(const json& w) {
  const std::string at = "$.approval_webhook";
  if (!w.is_object()) fail(at, "must be an object");
  for (const auto& [key, value] : w.items()) {
    (void)value;
    if (key != "url" && key != "hmac_key_file" && key != "signing" && key != "timeout_ms")
      fail(at + "." + key, "unknown field");
  }
  ApprovalWebhookConfig c;
  c.url = get_string(w, "url", "", at);
  if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0)
    fail(at + ".url", "must be an http:// or https:// URL");
  if (c.url.find_first_of(" \t\r\n") != std::string::npos) fail(at + ".url", "must not hold spaces");
  c.hmac_key_file = get_string(w, "hmac_key_file", "", at);
  if (!c.hmac_key_file.empty() && c.hmac_key_file.front() != '/')
    fail(at + ".hmac_key_file", "must be an absolute path");
  const std::string signing = get_string(w, "signing", "", at);
  if (!signing.empty() && signing != "ed25519") fail(at + ".signing", "must be \"ed25519\"");
  c.ed25519 = signing == "ed25519";
  if (c.hmac_key_file.empty() && !c.ed25519)
    fail(at, "must be signed: \"hmac_key_file\", \"signing\": \"ed25519\" or both");
  if (w.contains("timeout_ms")) {
    const json& t = w["timeout_ms"];
    if (!t.is_number_unsigned() || t.get<uint64_t>() < 100 || t.get<uint64_t>() > 60000)
      fail(at + ".timeout_ms", "must be an integer between 100 and 60000");
    c.timeout_ms = t.get<uint32_t>();
  }
  return c;
}

}  // namespace

std::string DaemonConfig::webhook_signing_key() const {
  return (std::filesystem::path(host_key).parent_path() / "webhook-ed25519.key").string();
}

std::string DaemonConfig::command_signing_key() const {
  return (std::filesystem::path(host_key).parent_path() / "command-ed25519.key").string();
}

std::string DaemonConfig::audit_signing_key() const {
  return (std::filesystem::path(host_key).parent_path() / "audit-ed25519.key").string();
}

std::string DaemonConfig::command_result_root() const {
  return (std::filesystem::path(host_key).parent_path() / "command-results.key").string();
}

DaemonConfig parse_daemon_config(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("$", "invalid JSON at byte " + std::to_string(e.byte));
  }
  if (!doc.is_object()) fail("$", "must be an object");
  static const char* kKnown[] = {"netns",
                                 "pin_root",
                                 "state_dir",
                                 "control_socket",
                                 "address_pool_ipv4",
                                 "address_pool_ipv6",
                                 "guest_prefix_ipv4",
                                 "guest_prefix_ipv6",
                                 "proxy_port",
                                 "dns_port",
                                 "dns_static",
                                 "dns_upstream",
                                 "drop_event_rate",
                                 "drop_event_burst",
                                 "dns_unanswered_rate",
                                 "dns_answers_per_session",
                                 "dns_pending_per_session",
                                 "dns_tcp_per_session",
                                 "dns_queries_per_second",
                                 "dns_query_burst",
                                 "metrics_port",
                                 "proxy_idle_timeout_ms",
                                 "proxy_max_connections",
                                 "proxy_max_connections_per_guest",
                                 "proxy_header_timeout_ms",
                                 "proxy_kernel_splice",
                                 "proxy_http2",
                                 "proxy_upstream_http2",
                                 "proxy_tls_resumption",
                                 "proxy_websocket_idle_timeout_ms",
                                 "proxy_websocket_max_message",
                                 "host_key",
                                 "secret_read_linger_ms",
                                 "jwt_issuer",
                                 "jwt_lifetime_s",
                                 "jwks_listen",
                                 "approval_timeout_ms",
                                 "approval_held_per_session",
                                 "capability_threads",
                                 "capability_calls_per_session",
                                 "proxy_workers",
                                 "proxy_workers_per_session",
                                 "approval_grant_max_s",
                                 "expose_address",
                                 "expose_ticket_ttl_s",
                                 "expose_binding_s",
                                 "expose_head_timeout_ms",
                                 "expose_refusal_burst",
                                 "expose_refusals_per_minute",
                                 "agent_port",
                                 "agent_binary",
                                 "audit_sinks",
                                 "audit_host",
                                 "audit_retention",
                                 "audit_gather_ms",
                                 "approval_webhook",
                                 "upstream_ca_bundle",
                                 "upstream_allow",
                                 "nat64_prefix",
                                 "stores",
                                 "capability_addresses",
                                 "vm_uid_base",
                                 "vm_accel",
                                 "tc_attach",
                                 "vm_cache_dir",
                                 "vm_qemu"};
  for (const auto& [key, value] : doc.items()) {
    (void)value;
    // "// name": a comment (JSON has none); the example config is commented this way.
    if (key.rfind("//", 0) == 0) continue;
    if (std::find(std::begin(kKnown), std::end(kKnown), key) == std::end(kKnown))
      fail("$." + key, "unknown field");
  }
  DaemonConfig c;
  c.netns = get_string(doc, "netns", c.netns);
  c.pin_root = get_string(doc, "pin_root", c.pin_root);
  c.state_dir = get_string(doc, "state_dir", c.state_dir);
  c.control_socket = get_string(doc, "control_socket", c.control_socket);
  c.host_key = get_string(doc, "host_key", c.host_key);
  c.jwt_issuer = get_string(doc, "jwt_issuer", c.jwt_issuer);
  if (c.jwt_issuer.empty()) fail("$.jwt_issuer", "must not be empty");
  c.jwt_lifetime_s = get_uint(doc, "jwt_lifetime_s", c.jwt_lifetime_s, 1, 3600);
  if (const std::string listen = get_string(doc, "jwks_listen", ""); !listen.empty()) {
    const size_t colon = listen.rfind(':');
    in_addr ignored{};
    const std::string ip = colon == std::string::npos ? "" : listen.substr(0, colon);
    const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
    const bool ok = ::inet_pton(AF_INET, ip.c_str(), &ignored) == 1 && !port.empty() && port.size() <= 5 &&
                    port.find_first_not_of("0123456789") == std::string::npos && std::stoul(port) >= 1 &&
                    std::stoul(port) <= 65535;
    if (!ok) fail("$.jwks_listen", "must be \"IPv4:PORT\" (e.g. \"198.18.255.1:8089\")");
    c.jwks_address = ip;
    c.jwks_port = static_cast<uint16_t>(std::stoul(port));
  }
  c.address_pool_ipv4 = get_string(doc, "address_pool_ipv4", c.address_pool_ipv4);
  c.address_pool_ipv6 = get_string(doc, "address_pool_ipv6", c.address_pool_ipv6);
  c.guest_prefix_ipv4 = get_uint(doc, "guest_prefix_ipv4", c.guest_prefix_ipv4, 1, 30);
  c.guest_prefix_ipv6 = get_uint(doc, "guest_prefix_ipv6", c.guest_prefix_ipv6, 1, 126);
  c.proxy_port = static_cast<uint16_t>(get_uint(doc, "proxy_port", c.proxy_port, 1, 65535));
  c.dns_port = static_cast<uint16_t>(get_uint(doc, "dns_port", c.dns_port, 1, 65535));
  c.proxy_idle_timeout_ms = get_uint(doc, "proxy_idle_timeout_ms", c.proxy_idle_timeout_ms, 100, 86400000);
  c.metrics_port = static_cast<uint16_t>(get_uint(doc, "metrics_port", c.metrics_port, 0, 65535));
  c.proxy_header_timeout_ms =
      get_uint(doc, "proxy_header_timeout_ms", c.proxy_header_timeout_ms, 100, 600000);
  if (doc.contains("proxy_http2")) {
    if (!doc["proxy_http2"].is_boolean()) fail("$.proxy_http2", "must be true or false");
    c.proxy_http2 = doc["proxy_http2"].get<bool>();
  }
  c.proxy_websocket_idle_timeout_ms =
      get_uint(doc, "proxy_websocket_idle_timeout_ms", c.proxy_websocket_idle_timeout_ms, 100, 86400000);
  c.proxy_websocket_max_message =
      get_uint(doc, "proxy_websocket_max_message", c.proxy_websocket_max_message, 1024, 256u * 1024 * 1024);
  if (doc.contains("proxy_upstream_http2")) {
    if (!doc["proxy_upstream_http2"].is_boolean()) fail("$.proxy_upstream_http2", "must be true or false");
    c.proxy_upstream_http2 = doc["proxy_upstream_http2"].get<bool>();
  }
  if (doc.contains("proxy_tls_resumption")) {
    if (!doc["proxy_tls_resumption"].is_boolean()) fail("$.proxy_tls_resumption", "must be true or false");
    c.proxy_tls_resumption = doc["proxy_tls_resumption"].get<bool>();
  }
  if (doc.contains("proxy_kernel_splice")) {
    if (!doc["proxy_kernel_splice"].is_boolean()) fail("$.proxy_kernel_splice", "must be true or false");
    c.proxy_kernel_splice = doc["proxy_kernel_splice"].get<bool>();
  }
  c.secret_read_linger_ms = get_uint(doc, "secret_read_linger_ms", c.secret_read_linger_ms, 0, 10000);
  c.approval_timeout_ms = get_uint(doc, "approval_timeout_ms", c.approval_timeout_ms, 100, 86400000);
  c.audit_gather_ms = get_uint(doc, "audit_gather_ms", c.audit_gather_ms, 0, 100);
  c.approval_held_per_session =
      get_uint(doc, "approval_held_per_session", c.approval_held_per_session, 1, 100000);
  c.capability_threads = get_uint(doc, "capability_threads", c.capability_threads, 2, 256);
  c.capability_calls_per_session =
      get_uint(doc, "capability_calls_per_session", c.capability_calls_per_session, 1, 255);
  if (c.capability_calls_per_session >= c.capability_threads)
    fail("$.capability_calls_per_session",
         "must be below capability_threads (another session always has one)");
  c.proxy_workers = get_uint(doc, "proxy_workers", c.proxy_workers, 2, 256);
  c.proxy_workers_per_session =
      get_uint(doc, "proxy_workers_per_session", c.proxy_workers_per_session, 1, 255);
  if (c.proxy_workers_per_session >= c.proxy_workers)
    fail("$.proxy_workers_per_session", "must be below proxy_workers (another session always has one)");
  c.approval_grant_max_s = get_uint(doc, "approval_grant_max_s", c.approval_grant_max_s, 1, 7 * 24 * 3600);
  c.expose_address = get_string(doc, "expose_address", c.expose_address);
  if (!net::IpAddress::parse(c.expose_address))
    fail("$.expose_address", "must be an IP address, e.g. 127.0.0.1");
  c.expose_ticket_ttl_s = get_uint(doc, "expose_ticket_ttl_s", c.expose_ticket_ttl_s, 1, 86400);
  c.expose_binding_s = get_uint(doc, "expose_binding_s", c.expose_binding_s, 1, 86400);
  c.expose_head_timeout_ms = get_uint(doc, "expose_head_timeout_ms", c.expose_head_timeout_ms, 100, 600000);
  c.expose_refusal_burst = get_uint(doc, "expose_refusal_burst", c.expose_refusal_burst, 1, 100000);
  c.expose_refusals_per_minute =
      get_uint(doc, "expose_refusals_per_minute", c.expose_refusals_per_minute, 1, 6000000);
  c.agent_port = get_uint(doc, "agent_port", c.agent_port, 0, 65535);
  c.agent_binary = get_string(doc, "agent_binary", c.agent_binary);
  if (!c.agent_binary.empty() && c.agent_binary.front() != '/')
    fail("$.agent_binary", "must be an absolute path");
  if (doc.contains("approval_webhook")) c.approval_webhook = parse_webhook(doc["approval_webhook"]);
  if (doc.contains("audit_sinks")) {
    check_audit_sinks(doc["audit_sinks"]);
    c.audit_sinks = doc["audit_sinks"];
  }
  c.audit_host = get_string(doc, "audit_host", c.audit_host);
  if (doc.contains("audit_retention")) c.audit_retention = parse_audit_retention(doc["audit_retention"]);
  if (c.audit_host.size() > 255 || c.audit_host.find_first_of(" \t\r\n/") != std::string::npos)
    fail("$.audit_host", "must be a host name (no spaces or slashes, at most 255 bytes)");
  c.proxy_max_connections = get_uint(doc, "proxy_max_connections", c.proxy_max_connections, 1, 1000000);
  c.proxy_max_connections_per_guest =
      get_uint(doc, "proxy_max_connections_per_guest", c.proxy_max_connections_per_guest, 1, 65536);
  c.upstream_ca_bundle = get_string(doc, "upstream_ca_bundle", c.upstream_ca_bundle);
  if (!c.upstream_ca_bundle.empty() && c.upstream_ca_bundle.front() != '/')
    fail("$.upstream_ca_bundle", "must be an absolute path");
  c.drop_event_rate = get_uint(doc, "drop_event_rate", c.drop_event_rate, 1, 100000);
  c.drop_event_burst = get_uint(doc, "drop_event_burst", c.drop_event_burst, 1, 100000);
  c.dns_unanswered_rate = get_uint(doc, "dns_unanswered_rate", c.dns_unanswered_rate, 1, 100000);
  c.dns_answers_per_session =
      get_uint(doc, "dns_answers_per_session", c.dns_answers_per_session, 16, 1000000);
  c.dns_pending_per_session = get_uint(doc, "dns_pending_per_session", c.dns_pending_per_session, 1, 1024);
  // Below the responder's 64: another session always has one.
  c.dns_tcp_per_session = get_uint(doc, "dns_tcp_per_session", c.dns_tcp_per_session, 1, 63);
  c.dns_queries_per_second = get_uint(doc, "dns_queries_per_second", c.dns_queries_per_second, 1, 1000000);
  c.dns_query_burst = get_uint(doc, "dns_query_burst", c.dns_query_burst, 1, 1000000);
  for (const std::string* path : {&c.pin_root, &c.state_dir, &c.control_socket, &c.host_key})
    if (path->empty() || path->front() != '/') fail("$", "paths must be absolute: '" + *path + "'");
  {
    // Inside the state directory, a copy of it would carry the key along.
    namespace fs = std::filesystem;
    fs::path state = fs::path(c.state_dir).lexically_normal();
    if (!state.has_filename()) state = state.parent_path();  // "/var/lib/zeroness/"
    const fs::path rel = fs::path(c.host_key).lexically_normal().lexically_relative(state);
    if (rel.empty() || *rel.begin() != "..")
      fail("$.host_key", "must be outside state_dir (a copy of the state must not carry the key)");
  }
  if (doc.contains("dns_static")) {
    const json& s = doc["dns_static"];
    if (!s.is_object()) fail("$.dns_static", "must be an object of name -> [addresses]");
    for (const auto& [name, addrs] : s.items()) {
      const std::string path = "$.dns_static." + name;
      auto normalized = normalize_dns_name(name);
      if (!normalized) fail(path, "not a DNS name");
      if (!addrs.is_array() || addrs.empty()) fail(path, "must be a non-empty array of addresses");
      for (const auto& a : addrs) {
        if (!a.is_string() || !is_address(a.get<std::string>())) fail(path, "must hold IP addresses");
        c.dns_static[*normalized].push_back(a.get<std::string>());
      }
    }
  }
  // The pools feed the proxy's guard too: each must be a prefix of its family.
  for (const auto& [key, text, family] : {std::tuple{"address_pool_ipv4", &c.address_pool_ipv4, AF_INET},
                                          std::tuple{"address_pool_ipv6", &c.address_pool_ipv6, AF_INET6}}) {
    auto pool = net::AddressPrefix::parse(*text);
    if (!pool || pool->network.family != family || text->find('/') == std::string::npos)
      fail(std::string("$.") + key, "must be an " + std::string(family == AF_INET ? "IPv4" : "IPv6") +
                                        " prefix with no host bits, e.g. " +
                                        (family == AF_INET ? "198.19.0.0/16" : "2001:db8:19::/48"));
  }
  // Each per-guest prefix must fit its pool (the plan says which does not).
  try {
    (void)c.address_plan();
  } catch (const std::invalid_argument& e) {
    fail(std::string("$.") + (std::string(e.what()).find("IPv6") != std::string::npos ? "guest_prefix_ipv6"
                                                                                      : "guest_prefix_ipv4"),
         e.what());
  }
  if (doc.contains("upstream_allow")) {
    const json& u = doc["upstream_allow"];
    if (!u.is_array()) fail("$.upstream_allow", "must be an array of address prefixes");
    for (size_t i = 0; i < u.size(); ++i) {
      const std::string path = "$.upstream_allow[" + std::to_string(i) + "]";
      if (!u[i].is_string()) fail(path, "must be a string");
      if (!net::AddressPrefix::parse(u[i].get<std::string>()))
        fail(path, "must be an address or prefix with no host bits, e.g. 198.18.0.0/16");
      c.upstream_allow.push_back(u[i].get<std::string>());
    }
  }
  c.nat64_prefix = get_string(doc, "nat64_prefix", c.nat64_prefix);
  if (!c.nat64_prefix.empty()) {
    auto p = net::AddressPrefix::parse(c.nat64_prefix);
    if (!p || p->network.family != AF_INET6 || p->length != 96)
      fail("$.nat64_prefix", "must be an IPv6 /96 prefix, e.g. 64:ff9b::/96");
  }
  c.vm_uid_base = get_uint(doc, "vm_uid_base", c.vm_uid_base, 1000, 0xfff00000u);
  c.vm_accel = get_string(doc, "vm_accel", c.vm_accel);
  if (c.vm_accel != "auto" && c.vm_accel != "kvm" && c.vm_accel != "tcg")
    fail("$.vm_accel", "must be \"auto\", \"kvm\" or \"tcg\"");
  c.tc_attach = get_string(doc, "tc_attach", c.tc_attach);
  if (c.tc_attach != "clsact" && c.tc_attach != "tcx") fail("$.tc_attach", "must be \"clsact\" or \"tcx\"");
  c.vm_cache_dir = get_string(doc, "vm_cache_dir", c.vm_cache_dir);
  c.vm_qemu = get_string(doc, "vm_qemu", c.vm_qemu);
  for (const auto& [key, path] :
       {std::pair{"vm_cache_dir", &c.vm_cache_dir}, std::pair{"vm_qemu", &c.vm_qemu}})
    if (!path->empty() && path->front() != '/') fail(std::string("$.") + key, "must be an absolute path");
  c.stores = parse_store_catalog(doc.contains("stores") ? doc["stores"] : json(), c.state_dir);
  if (doc.contains("capability_addresses"))
    c.capability_addresses = parse_capability_addresses(doc["capability_addresses"]);
  for (size_t i = 0; i < c.capability_addresses.size(); ++i) {
    // A guest's address would be answered for the gateway: never inside a pool.
    auto a = net::IpAddress::parse(c.capability_addresses[i]);
    for (const std::string* pool : {&c.address_pool_ipv4, &c.address_pool_ipv6})
      if (a && net::AddressPrefix::parse(*pool)->contains(*a))
        fail("$.capability_addresses[" + std::to_string(i) + "]", "must not be inside an address pool");
  }
  if (doc.contains("dns_upstream")) {
    const json& u = doc["dns_upstream"];
    if (!u.is_array()) fail("$.dns_upstream", "must be an array of addresses");
    for (const auto& a : u) {
      if (!a.is_string()) fail("$.dns_upstream", "must hold strings");
      c.dns_upstream.push_back(a.get<std::string>());
    }
  }
  return c;
}

DaemonConfig load_daemon_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read config " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_daemon_config(text.str());
}

}  // namespace zn::broker
