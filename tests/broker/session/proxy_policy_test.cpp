// SessionProxyPolicy as tables, without root: for each row a policy, the
// facts the proxy reports, the verdict and the audit event it must give.
// Hostile rows first; every refusal has a positive control on the same path
// (rows share a `path` label, and each label must have both outcomes). The
// expected verdicts, reasons and events are today's, as the integration tests
// (tests/integration/intercept_test.cpp, proxy_test.cpp) see them end to end.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>

#include "broker/session/fake_directory.h"

namespace zn::broker::test {
namespace {

using namespace std::chrono_literals;
using proxy::ConnectionMode;

constexpr const char* kToken = "sk_live_unit_test_4f9a8b7c6d";

// The session "s1" (guest 198.19.0.2, 2001:db8:19::2). Allow rule indices
// are what a verdict's rule names.
std::string policy(const std::string& rate = "") {
  return R"({"policy":{"allow":[
      {"host":"api.github.com","methods":["GET"],"paths":["/repos/**"]},
      {"host":"api.github.com","methods":["DELETE"],"paths":["/repos/**"],"action":"ask"},
      {"host":"api.stripe.com","identity":"cap:stripe"},
      {"host":"*.npmjs.org"},
      {"host":"198.18.0.12"},
      {"host":"198.18.0.14","methods":["GET"]},
      {"host":"10.0.0.7"},
      {"host":"db.internal","port":5432,"proto":"tcp"},
      {"host":"198.18.1.0/24","port":8443,"proto":"tcp"},
      {"host":"10.0.0.5","port":5432,"proto":"tcp"}],
    "deny":[{"host":"evil.example"},{"host":"bad.npmjs.org"}])" +
         rate + R"(},
   "resources":{"stripe":{"accessToken":")" +
         kToken + R"("}}})";
}

// The session "s2" (guest 198.19.1.2): the same npm wildcard, nothing else.
const std::string kOtherPolicy = R"({"policy":{"allow":[{"host":"*.npmjs.org"}]}})";

struct Told {
  std::string sid, name;
  std::vector<std::string> addresses;  // empty: what the resolver answers
};

void tell(Broker& b, const Told& t) {
  if (t.addresses.empty()) return b.told(t.sid, t.name);
  std::vector<net::IpAddress> list;
  for (const std::string& a : t.addresses) list.push_back(*net::IpAddress::parse(a));
  b.dns.on_answer({t.sid, nullptr}, t.name, list, 60);
}

std::vector<std::string> texts(const std::vector<net::IpAddress>& addresses) {
  std::vector<std::string> out;
  for (const auto& a : addresses) out.push_back(a.to_string());
  return out;
}

// A label with a refused row must have an allowed one too.
void expect_controls(const std::map<std::string, std::set<bool>>& outcomes) {
  for (const auto& [path, seen] : outcomes)
    EXPECT_TRUE(!seen.count(false) || seen.count(true)) << path << ": no positive control";
}

// ---- Connections: splice, intercept or reset -------------------------------

struct ConnectionRow {
  const char* name;
  const char* path;  // rows of one path: refused and allowed
  std::string guest;
  std::string dst;
  uint16_t port;
  bool tls;
  std::optional<std::string> sni;
  bool sni_is_ip_literal;
  std::vector<Told> told;
  ConnectionMode mode;
  std::string reason;
  std::vector<std::string> addresses;  // passthrough: where to connect
  std::string session;
  std::string event;  // "" for none
};

TEST(SessionProxyPolicyTable, ConnectionVerdicts) {
  const std::string g4 = "198.19.0.2", g6 = "2001:db8:19::2";
  const Told npm{"s1", "registry.npmjs.org", {}};
  const std::vector<ConnectionRow> rows = {
      // A guest address no session has: reset, whatever it asks.
      {"unknown guest",
       "guest",
       "198.19.9.2",
       "198.18.0.12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kReset,
       "unknown guest",
       {},
       "",
       "egress:deny"},
      {"unknown guest, v6",
       "guest",
       "2001:db8:19:9::2",
       "2001:db8:18::12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kReset,
       "unknown guest",
       {},
       "",
       "egress:deny"},
      {"unknown guest, port 80",
       "guest",
       "198.19.9.2",
       "198.18.0.12",
       80,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "unknown guest",
       {},
       "",
       "egress:deny"},
      {"known guest",
       "guest",
       g4,
       "198.18.0.12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12", "2001:db8:18::12"},
       "s1",
       ""},
      {"known guest, v6",
       "guest",
       g6,
       "2001:db8:18::12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12", "2001:db8:18::12"},
       "s1",
       ""},

      // Port 443 must be TLS.
      {"not TLS on 443",
       "tls",
       g4,
       "198.18.0.12",
       443,
       false,
       {},
       false,
       {npm},
       ConnectionMode::kReset,
       "not TLS on port 443",
       {},
       "s1",
       "egress:deny"},
      {"TLS on 443",
       "tls",
       g4,
       "198.18.0.12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12", "2001:db8:18::12"},
       "s1",
       ""},

      // No SNI: only a rule naming the destination address allows it.
      {"no SNI",
       "no sni",
       g4,
       "198.18.0.11",
       443,
       true,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no SNI",
       {},
       "s1",
       "egress:deny"},
      {"no SNI, address named",
       "no sni",
       g4,
       "198.18.0.12",
       443,
       true,
       {},
       false,
       {},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12"},
       "s1",
       ""},

      // IP-literal SNI: only when a rule names it, and then to that address,
      // never to where the guest aimed; a special-purpose one stays refused.
      {"IP-literal SNI not named",
       "ip sni",
       g4,
       "198.18.0.11",
       443,
       true,
       "198.18.0.11",
       true,
       {},
       ConnectionMode::kReset,
       "IP-literal SNI not named by a rule",
       {},
       "s1",
       "egress:deny"},
      {"IP-literal SNI named, refused class",
       "ip sni",
       g4,
       "198.18.0.12",
       443,
       true,
       "10.0.0.7",
       true,
       {},
       ConnectionMode::kReset,
       "special-purpose: private",
       {},
       "s1",
       "egress:deny"},
      {"IP-literal SNI named",
       "ip sni",
       g4,
       "198.18.0.13",
       443,
       true,
       "198.18.0.12",
       true,
       {},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12"},
       "s1",
       ""},
      {"IP-literal SNI named with conditions",
       "ip sni",
       g4,
       "198.18.0.14",
       443,
       true,
       "198.18.0.14",
       true,
       {},
       ConnectionMode::kIntercept,
       "",
       {},
       "s1",
       ""},

      // A name: spliced only to what governed DNS told this session, and that
      // the resolver still gives, and the guard allows.
      {"name never resolved through governed DNS",
       "pinning",
       g4,
       "198.18.0.12",
       443,
       true,
       "other.npmjs.org",
       false,
       {},
       ConnectionMode::kReset,
       "name was not resolved through governed DNS",
       {},
       "s1",
       "egress:deny"},
      {"name told to another session only",
       "pinning",
       "198.19.1.2",
       "198.18.0.12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kReset,
       "name was not resolved through governed DNS",
       {},
       "s2",
       "egress:deny"},
      {"told answer no longer what the name resolves to",
       "pinning",
       g4,
       "198.18.0.99",
       443,
       true,
       "registry.npmjs.org",
       false,
       {{"s1", "registry.npmjs.org", {"198.18.0.99"}}},
       ConnectionMode::kReset,
       "no permitted upstream address",
       {},
       "s1",
       "egress:deny"},
      {"name resolving to the metadata address",
       "pinning",
       g4,
       "169.254.169.254",
       443,
       true,
       "meta.npmjs.org",
       false,
       {{"s1", "meta.npmjs.org", {}}},
       ConnectionMode::kReset,
       "special-purpose: metadata",
       {},
       "s1",
       "egress:deny"},
      {"SNI of an allowed name aimed at another address",
       "pinning",
       g4,
       "198.18.0.13",
       443,
       true,
       "registry.npmjs.org",
       false,
       {npm},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12", "2001:db8:18::12"},
       "s1",
       ""},
      {"told to the other session itself",
       "pinning",
       "198.19.1.2",
       "198.18.0.12",
       443,
       true,
       "registry.npmjs.org",
       false,
       {{"s2", "registry.npmjs.org", {}}},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.12", "2001:db8:18::12"},
       "s2",
       ""},

      // Names the policy refuses or conditions are terminated: the guest gets
      // the per-request answer (a 403 with the reason), audited then.
      {"name not in policy",
       "terminated",
       g4,
       "198.18.0.10",
       443,
       true,
       "api.openai.com",
       false,
       {},
       ConnectionMode::kIntercept,
       "",
       {},
       "s1",
       ""},
      {"denied name under an allowed wildcard",
       "terminated",
       g4,
       "198.18.0.12",
       443,
       true,
       "bad.npmjs.org",
       false,
       {},
       ConnectionMode::kIntercept,
       "",
       {},
       "s1",
       ""},
      {"rule with request conditions",
       "terminated",
       g4,
       "198.18.0.10",
       443,
       true,
       "api.github.com",
       false,
       {},
       ConnectionMode::kIntercept,
       "",
       {},
       "s1",
       ""},
      {"plain HTTP",
       "terminated",
       g4,
       "198.18.0.10",
       80,
       false,
       {},
       false,
       {},
       ConnectionMode::kIntercept,
       "",
       {},
       "s1",
       ""},

      // Raw TCP: only to a destination and port of the L4 plan.
      {"L4 port not in the plan",
       "l4",
       g4,
       "198.18.0.13",
       5433,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no L4 rule for this destination",
       {},
       "s1",
       "egress:deny"},
      {"L4 address not in the plan",
       "l4",
       g4,
       "198.18.0.14",
       5432,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no L4 rule for this destination",
       {},
       "s1",
       "egress:deny"},
      {"L4 outside the prefix",
       "l4",
       g4,
       "198.18.2.1",
       8443,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no L4 rule for this destination",
       {},
       "s1",
       "egress:deny"},
      {"L4 prefix, other port",
       "l4",
       g4,
       "198.18.1.77",
       8444,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no L4 rule for this destination",
       {},
       "s1",
       "egress:deny"},
      {"L4 rule naming a refused address",
       "l4",
       g4,
       "10.0.0.5",
       5432,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "special-purpose: private",
       {},
       "s1",
       "egress:deny"},
      {"L4 rule of the other session",
       "l4",
       "198.19.1.2",
       "198.18.0.13",
       5432,
       false,
       {},
       false,
       {},
       ConnectionMode::kReset,
       "no L4 rule for this destination",
       {},
       "s2",
       "egress:deny"},
      {"L4 rule by name",
       "l4",
       g4,
       "198.18.0.13",
       5432,
       false,
       {},
       false,
       {},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.0.13"},
       "s1",
       ""},
      {"L4 rule by prefix",
       "l4",
       g4,
       "198.18.1.77",
       8443,
       false,
       {},
       false,
       {},
       ConnectionMode::kPassthrough,
       "",
       {"198.18.1.77"},
       "s1",
       ""},
  };
  std::map<std::string, std::set<bool>> outcomes;
  int on_the_loop = 0, on_a_worker = 0;
  for (const ConnectionRow& row : rows) {
    SCOPED_TRACE(row.name);
    auto set_up = [&](Broker& x) {
      x.sessions.put("s1", policy(), 0);
      x.sessions.put("s2", kOtherPolicy, 1);
      for (const Told& t : row.told) tell(x, t);
    };
    Broker b;
    set_up(b);
    const size_t before = b.records().size();
    proxy::ConnectionFacts facts;
    facts.guest = endpoint(row.guest, 40000);
    facts.original_dst = endpoint(row.dst, row.port);
    facts.tls = row.tls;
    facts.sni = row.sni;
    facts.sni_is_ip_literal = row.sni_is_ip_literal;
    // On the loop, the same decision and records, or none at all and
    // nothing recorded: only a splice to a name waits for a worker.
    {
      Broker a;
      set_up(a);
      const size_t a_before = a.records().size();
      const std::optional<proxy::UpstreamDecision> at_once = a.proxy.decide_at_once(facts);
      // A terminated connection never waits; a splice to a name always does.
      const bool spliced_to_a_name =
          row.mode == ConnectionMode::kPassthrough && row.sni && !row.sni_is_ip_literal;
      const bool may_wait = row.port == 443 && row.sni && !row.sni_is_ip_literal;
      EXPECT_TRUE(row.mode != ConnectionMode::kIntercept || at_once.has_value());
      EXPECT_TRUE(!spliced_to_a_name || !at_once.has_value());
      EXPECT_TRUE(at_once.has_value() || may_wait);
      ++(at_once ? on_the_loop : on_a_worker);
      if (at_once) {
        EXPECT_EQ(static_cast<int>(at_once->mode), static_cast<int>(row.mode));
        EXPECT_EQ(at_once->reason, row.reason);
        EXPECT_EQ(texts(at_once->addresses), row.addresses);
        EXPECT_EQ(a.events_since(a_before),
                  row.event.empty() ? std::vector<std::string>{} : std::vector<std::string>{row.event});
      } else {
        EXPECT_EQ(a.events_since(a_before), std::vector<std::string>{});
      }
    }
    const proxy::UpstreamDecision d = b.proxy.decide(facts);
    EXPECT_EQ(static_cast<int>(d.mode), static_cast<int>(row.mode));
    EXPECT_EQ(d.reason, row.reason);
    EXPECT_EQ(texts(d.addresses), row.addresses);
    EXPECT_EQ(d.session, row.session);
    EXPECT_EQ(d.port, row.port);
    EXPECT_EQ(d.tls, row.port == 443 && row.tls && !row.session.empty());  // port 80 is cleartext
    EXPECT_EQ(b.events_since(before),
              row.event.empty() ? std::vector<std::string>{} : std::vector<std::string>{row.event});
    outcomes[row.path].insert(d.mode != ConnectionMode::kReset);
  }
  expect_controls(outcomes);
  EXPECT_GT(on_the_loop, 10);
  EXPECT_GT(on_a_worker, 2);
}

// ---- Requests on an intercepted connection ----------------------------------

struct RequestRow {
  const char* name;
  const char* path;
  std::string session;
  std::optional<std::string> sni;  // set: TLS terminated for this name; unset: port 80
  uint16_t port;
  std::string host_header, method, target_path;
  bool allow;
  int status;  // when refused
  std::string reason;
  std::string host;  // the normalised Host the verdict is about
  std::optional<size_t> rule;
  std::string identity;
  std::string event;  // "" for none
};

TEST(SessionProxyPolicyTable, RequestVerdicts) {
  const std::optional<std::string> gh = "api.github.com", stripe = "api.stripe.com", none;
  const std::vector<RequestRow> rows = {
      // Domain fronting: the Host must be the name the TLS session is for.
      {"Host other than the SNI",
       "host",
       "s1",
       gh,
       443,
       "api.stripe.com",
       "GET",
       "/repos/a",
       false,
       421,
       "Host does not match SNI",
       "api.stripe.com",
       {},
       "",
       "egress:deny"},
      {"Host a subdomain of the SNI",
       "host",
       "s1",
       gh,
       443,
       "x.api.github.com",
       "GET",
       "/repos/a",
       false,
       421,
       "Host does not match SNI",
       "x.api.github.com",
       {},
       "",
       "egress:deny"},
      {"Host port other than the connection's",
       "host",
       "s1",
       gh,
       443,
       "api.github.com:8443",
       "GET",
       "/repos/a",
       false,
       421,
       "Host port does not match the connection",
       "api.github.com",
       {},
       "",
       "egress:deny"},
      {"no Host (HTTP/1.0)",
       "host",
       "s1",
       gh,
       443,
       "",
       "GET",
       "/repos/a",
       false,
       400,
       "bad Host header",
       "",
       {},
       "",
       "egress:deny"},
      {"Host port 0",
       "host",
       "s1",
       gh,
       443,
       "api.github.com:0",
       "GET",
       "/repos/a",
       false,
       400,
       "bad Host header",
       "",
       {},
       "",
       "egress:deny"},
      {"Host with an unclosed bracket",
       "host",
       "s1",
       gh,
       443,
       "[2001:db8::1",
       "GET",
       "/repos/a",
       false,
       400,
       "bad Host header",
       "",
       {},
       "",
       "egress:deny"},
      {"Host equal to the SNI", "host", "s1", gh, 443, "api.github.com", "GET", "/repos/a", true, 0, "",
       "api.github.com", 0, "", ""},
      {"Host of another case, port and trailing dot", "host", "s1", gh, 443, "API.GitHub.com.:443", "GET",
       "/repos/a", true, 0, "", "api.github.com", 0, "", ""},

      // An identity is never sent over cleartext.
      {"identity rule over port 80",
       "identity",
       "s1",
       none,
       80,
       "api.stripe.com",
       "POST",
       "/v1/charges",
       false,
       403,
       "identity is never sent over cleartext",
       "api.stripe.com",
       {},
       "",
       "egress:deny"},
      {"identity rule over TLS", "identity", "s1", stripe, 443, "api.stripe.com", "POST", "/v1/charges", true,
       0, "", "api.stripe.com", 2, "stripe", ""},
      {"plain HTTP without identity", "identity", "s1", none, 80, "registry.npmjs.org", "GET", "/-/ping",
       true, 0, "", "registry.npmjs.org", 3, "", ""},

      // Names: default deny, and a deny rule beats any allow.
      {"name not in policy",
       "name",
       "s1",
       std::string("api.openai.com"),
       443,
       "api.openai.com",
       "GET",
       "/v1/models",
       false,
       403,
       "default deny",
       "api.openai.com",
       {},
       "",
       "egress:deny"},
      {"denied name under an allowed wildcard",
       "name",
       "s1",
       std::string("bad.npmjs.org"),
       443,
       "bad.npmjs.org",
       "GET",
       "/",
       false,
       403,
       "deny rule 1 (bad.npmjs.org)",
       "bad.npmjs.org",
       {},
       "",
       "egress:deny"},
      {"denied name over plain HTTP",
       "name",
       "s1",
       none,
       80,
       "evil.example",
       "GET",
       "/",
       false,
       403,
       "deny rule 0 (evil.example)",
       "evil.example",
       {},
       "",
       "egress:deny"},
      {"unknown session",
       "name",
       "ghost",
       gh,
       443,
       "api.github.com",
       "GET",
       "/repos/a",
       false,
       403,
       "unknown session",
       "",
       {},
       "",
       "egress:deny"},
      {"allowed name under the wildcard", "name", "s1", std::string("registry.npmjs.org"), 443,
       "registry.npmjs.org", "GET", "/", true, 0, "", "registry.npmjs.org", 3, "", ""},
      {"IP literal named with conditions", "name", "s1", std::string("198.18.0.14"), 443, "198.18.0.14",
       "GET", "/", true, 0, "", "198.18.0.14", 5, "", ""},

      // Methods and paths.
      {"method not allowed",
       "rule",
       "s1",
       gh,
       443,
       "api.github.com",
       "POST",
       "/repos/a",
       false,
       403,
       "method not allowed",
       "api.github.com",
       {},
       "",
       "egress:deny"},
      {"path not allowed",
       "rule",
       "s1",
       gh,
       443,
       "api.github.com",
       "GET",
       "/admin",
       false,
       403,
       "path not allowed",
       "api.github.com",
       {},
       "",
       "egress:deny"},
      {"method and path of the rule", "rule", "s1", gh, 443, "api.github.com", "GET", "/repos/zn/zeroness",
       true, 0, "", "api.github.com", 0, "", ""},
      // "ask": allowed only once approved, held with a ticket.
      {"ask rule", "rule", "s1", gh, 443, "api.github.com", "DELETE", "/repos/a", true, 0, "",
       "api.github.com", 1, "", "egress:ask"},
  };
  std::map<std::string, std::set<bool>> outcomes;
  for (const RequestRow& row : rows) {
    SCOPED_TRACE(row.name);
    Broker b;
    b.sessions.put("s1", policy(), 0);
    const size_t before = b.records().size();
    proxy::RequestFacts facts;
    facts.session = row.session;
    facts.sni = row.sni;
    facts.port = row.port;
    facts.host_header = row.host_header;
    facts.method = row.method;
    facts.path = row.target_path;
    const proxy::RequestDecision d = b.proxy.decide_request(facts);
    EXPECT_EQ(d.allow, row.allow);
    if (!row.allow) {
      EXPECT_EQ(d.status, row.status);
    }
    EXPECT_EQ(d.reason, row.reason);
    EXPECT_EQ(d.host, row.host);
    EXPECT_EQ(d.rule.has_value(), row.rule.has_value());
    if (d.rule && row.rule) {
      EXPECT_EQ(d.rule->index, *row.rule);
      EXPECT_EQ(d.rule->identity, row.identity);
    }
    EXPECT_EQ(d.hold_ticket != 0, row.event == "egress:ask");
    const std::vector<std::string> events = b.events_since(before);
    EXPECT_EQ(events, row.event.empty() ? std::vector<std::string>{} : std::vector<std::string>{row.event});
    if (!row.allow && !events.empty()) {
      const AuditRecord r = b.records().back();
      EXPECT_EQ(r.detail["status"], row.status);
      EXPECT_EQ(r.detail["reason"], row.reason);
      EXPECT_EQ(r.sid, row.session);
    }
    outcomes[row.path].insert(d.allow);
  }
  expect_controls(outcomes);
}

// ---- Where an intercepted request's upstream may be ------------------------

struct UpstreamRow {
  const char* name;
  const char* path;
  std::string session, host;
  std::vector<Told> told;
  std::vector<std::string> addresses;
  std::string reason;
};

TEST(SessionProxyPolicyTable, UpstreamAddresses) {
  const std::vector<UpstreamRow> rows = {
      {"unknown session",
       "session",
       "ghost",
       "api.github.com",
       {{"s1", "api.github.com", {}}},
       {},
       "unknown session"},
      {"known session",
       "session",
       "s1",
       "api.github.com",
       {{"s1", "api.github.com", {}}},
       {"198.18.0.10"},
       ""},
      {"name never told",
       "name",
       "s1",
       "api.github.com",
       {},
       {},
       "name was not resolved through governed DNS"},
      {"told a stale address",
       "name",
       "s1",
       "api.github.com",
       {{"s1", "api.github.com", {"198.18.0.99"}}},
       {},
       "no permitted upstream address"},
      {"told the metadata address",
       "name",
       "s1",
       "meta.npmjs.org",
       {{"s1", "meta.npmjs.org", {}}},
       {},
       "special-purpose: metadata"},
      {"told and resolved",
       "name",
       "s1",
       "registry.npmjs.org",
       {{"s1", "registry.npmjs.org", {}}},
       {"198.18.0.12", "2001:db8:18::12"},
       ""},
      {"address not named", "literal", "s1", "198.18.0.11", {}, {}, "address not named by a rule"},
      {"address named, refused class", "literal", "s1", "10.0.0.7", {}, {}, "special-purpose: private"},
      {"address named", "literal", "s1", "198.18.0.14", {}, {"198.18.0.14"}, ""},
  };
  std::map<std::string, std::set<bool>> outcomes;
  for (const UpstreamRow& row : rows) {
    SCOPED_TRACE(row.name);
    Broker b;
    b.sessions.put("s1", policy(), 0);
    for (const Told& t : row.told) tell(b, t);
    const size_t before = b.records().size();
    const proxy::UpstreamAddresses where = b.proxy.resolve_upstream(row.session, row.host);
    EXPECT_EQ(texts(where.addresses), row.addresses);
    EXPECT_EQ(where.reason, row.reason);
    EXPECT_EQ(b.events_since(before), std::vector<std::string>{});  // the exchange audits the request
    outcomes[row.path].insert(!where.addresses.empty());
  }
  expect_controls(outcomes);
}

// A new upstream connection does not resolve again while the last answer's
// TTL (capped) runs; a deleted session's resolutions go with it.
TEST(SessionProxyPolicyUpstream, ResolutionsAreRememberedPerSessionUntilItIsDeleted) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  b.sessions.put("s2", policy(), 1);
  tell(b, {"s1", "registry.npmjs.org", {}});
  tell(b, {"s2", "registry.npmjs.org", {}});
  const uint64_t before = b.proxy.upstream_resolutions();
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(texts(b.proxy.resolve_upstream("s1", "registry.npmjs.org").addresses),
              (std::vector<std::string>{"198.18.0.12", "2001:db8:18::12"}));
  EXPECT_EQ(b.proxy.upstream_resolutions(), before + 1);
  // Another session: its own resolution (a hit would tell s2 by timing that s1 asked).
  b.proxy.resolve_upstream("s2", "registry.npmjs.org");
  EXPECT_EQ(b.proxy.upstream_resolutions(), before + 2);
  // An update keeps them.
  b.sessions.put("s1", policy(), 0);
  b.proxy.resolve_upstream("s1", "registry.npmjs.org");
  EXPECT_EQ(b.proxy.upstream_resolutions(), before + 2);
  // Deleted and created again: a new session, which was told nothing yet.
  b.sessions.remove("s1");
  b.sessions.put("s1", policy(), 0);
  EXPECT_TRUE(b.proxy.resolve_upstream("s1", "registry.npmjs.org").addresses.empty());
  tell(b, {"s1", "registry.npmjs.org", {}});
  b.proxy.resolve_upstream("s1", "registry.npmjs.org");
  EXPECT_EQ(b.proxy.upstream_resolutions(), before + 3);
}

// ---- Rate -------------------------------------------------------------------

proxy::RequestFacts github_request(const std::string& session = "s1") {
  proxy::RequestFacts f;
  f.session = session;
  f.sni = "api.github.com";
  f.port = 443;
  f.host_header = "api.github.com";
  f.method = "GET";
  f.path = "/repos/a";
  return f;
}

TEST(SessionProxyPolicyRate, RequestsOverTheBurstAre429UntilTheBucketRefills) {
  Broker b;
  b.sessions.put("s1", policy(R"(,"rate":{"burst":2,"per_second":1})"), 0);
  b.sessions.put("s3", policy(), 2);  // no rate: never limited
  struct Step {
    std::chrono::milliseconds advance;
    int status;  // 0: allowed
  };
  // 2 at once, then one per second; the bucket never holds more than 2.
  const std::vector<Step> steps = {{0ms, 0},   {0ms, 0},   {0ms, 429}, {0ms, 429}, {500ms, 429},
                                   {500ms, 0}, {0ms, 429}, {10s, 0},   {0ms, 0},   {0ms, 429}};
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    b.now += steps[i].advance;
    const size_t before = b.records().size();
    const proxy::RequestDecision d = b.proxy.decide_request(github_request());
    EXPECT_EQ(d.allow, steps[i].status == 0);
    if (steps[i].status) {
      EXPECT_EQ(d.status, 429);
      EXPECT_EQ(d.reason, "session rate exceeded");
      EXPECT_EQ(b.events_since(before), std::vector<std::string>{"egress:rate_limited"});
    } else {
      EXPECT_EQ(b.events_since(before), std::vector<std::string>{});
    }
    // Another session's requests take nothing from this bucket.
    EXPECT_TRUE(b.proxy.decide_request(github_request("s3")).allow);
  }
  // A token is taken before the verdict: a refused request spends one too.
  b.now += 10s;
  proxy::RequestFacts denied = github_request();
  denied.path = "/admin";
  EXPECT_EQ(b.proxy.decide_request(denied).status, 403);
  EXPECT_EQ(b.proxy.decide_request(denied).status, 403);
  EXPECT_EQ(b.proxy.decide_request(github_request()).status, 429);
  // A deleted session's bucket goes with it: created again, full again.
  b.sessions.remove("s1");
  b.sessions.put("s1", policy(R"(,"rate":{"burst":2,"per_second":1})"), 0);
  EXPECT_TRUE(b.proxy.decide_request(github_request()).allow);
}

TEST(SessionProxyPolicyRate, SplicedConnectionsOverTheBurstAreRefusedUntilTheBucketRefills) {
  Broker b;
  b.sessions.put("s1", policy(R"(,"rate":{"burst":1,"per_second":1})"), 0);
  b.told("s1", "registry.npmjs.org");
  auto connect = [&](const std::string& dst, uint16_t port, std::optional<std::string> sni) {
    proxy::ConnectionFacts f;
    f.guest = endpoint("198.19.0.2", 40000);
    f.original_dst = endpoint(dst, port);
    f.tls = sni.has_value();
    f.sni = sni;
    return b.proxy.decide(f);
  };
  using Destination = std::tuple<std::string, uint16_t, std::optional<std::string>>;
  for (const auto& [dst, port, sni] : std::vector<Destination>{{"198.18.0.13", 5432, std::nullopt},
                                                               {"198.18.0.12", 443, "registry.npmjs.org"}}) {
    SCOPED_TRACE(dst);
    b.now += 10s;
    EXPECT_EQ(connect(dst, port, sni).mode, ConnectionMode::kPassthrough);
    const size_t before = b.records().size();
    const proxy::UpstreamDecision limited = connect(dst, port, sni);
    EXPECT_EQ(limited.mode, ConnectionMode::kReset);
    EXPECT_EQ(limited.reason, "rate limited");
    EXPECT_TRUE(limited.addresses.empty());
    EXPECT_EQ(b.events_since(before), std::vector<std::string>{"egress:rate_limited"});
    b.now += 1s;
    EXPECT_EQ(connect(dst, port, sni).mode, ConnectionMode::kPassthrough);
  }
  // Asked on the loop first, a splice to a name is left to a worker before
  // its rate is charged: the worker's decision still passes.
  b.now += 10s;
  proxy::ConnectionFacts named;
  named.guest = endpoint("198.19.0.2", 40000);
  named.original_dst = endpoint("198.18.0.12", 443);
  named.tls = true;
  named.sni = "registry.npmjs.org";
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(b.proxy.decide_at_once(named).has_value());
  EXPECT_EQ(b.proxy.decide(named).mode, ConnectionMode::kPassthrough);
  EXPECT_EQ(b.proxy.decide(named).reason, "rate limited");  // the positive control: one per second
  // Terminated connections are not charged: their requests are.
  EXPECT_EQ(connect("198.18.0.10", 443, "api.github.com").mode, ConnectionMode::kIntercept);
  EXPECT_EQ(connect("198.18.0.10", 80, std::nullopt).mode, ConnectionMode::kIntercept);
}

// ---- Held requests ----------------------------------------------------------

proxy::RequestFacts delete_request(const std::string& path) {
  proxy::RequestFacts f = github_request();
  f.method = "DELETE";
  f.path = path;
  return f;
}

TEST(SessionProxyPolicyAsk, AHeldRequestWaitsForItsOwnTicket) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  const proxy::RequestDecision a = b.proxy.decide_request(delete_request("/repos/a"));
  const proxy::RequestDecision c = b.proxy.decide_request(delete_request("/repos/c"));
  ASSERT_NE(a.hold_ticket, 0u);
  ASSERT_NE(c.hold_ticket, 0u);
  EXPECT_NE(a.hold_ticket, c.hold_ticket);
  const auto pending = b.approvals.pending();
  ASSERT_EQ(pending.size(), 2u);
  for (const HeldRequest& h : pending) {
    EXPECT_EQ(h.scheme, "https");
    EXPECT_EQ(h.host, "api.github.com");
  }
  EXPECT_EQ(b.proxy.hold_state("s1", a.hold_ticket).outcome, proxy::HoldOutcome::kPending);
  ASSERT_TRUE(b.approvals.decide(a.hold_ticket, true));
  ASSERT_TRUE(b.approvals.decide(c.hold_ticket, false));
  EXPECT_EQ(b.proxy.hold_state("s1", a.hold_ticket).outcome, proxy::HoldOutcome::kApproved);
  const proxy::HoldState denied = b.proxy.hold_state("s1", c.hold_ticket);
  EXPECT_EQ(denied.outcome, proxy::HoldOutcome::kRefused);
  EXPECT_EQ(denied.reason, "denied by operator");
  // An approval is read once: it never covers another request.
  const proxy::HoldState again = b.proxy.hold_state("s1", a.hold_ticket);
  EXPECT_EQ(again.outcome, proxy::HoldOutcome::kRefused);
  EXPECT_EQ(again.reason, "approval unknown");
}

// Issue 30: a held request was decided under the policy of its hold (its
// rule, placeholders, injection). Approved after an update or a delete, it
// is refused, whatever the update changed; the guest's retry is decided
// anew. The positive control: the same approval without the update passes.
TEST(SessionProxyPolicyAsk, AnApprovalAfterThePolicyChangedIsRefused) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  const proxy::RequestDecision kept = b.proxy.decide_request(delete_request("/repos/kept"));
  const proxy::RequestDecision stale = b.proxy.decide_request(delete_request("/repos/stale"));
  ASSERT_NE(kept.hold_ticket, 0u);
  ASSERT_NE(stale.hold_ticket, 0u);
  ASSERT_TRUE(b.approvals.decide(kept.hold_ticket, true));
  EXPECT_EQ(b.proxy.hold_state("s1", kept.hold_ticket).outcome, proxy::HoldOutcome::kApproved);
  b.sessions.put("s1", policy(), 0);  // an update (the same text: still a new version)
  ASSERT_TRUE(b.approvals.decide(stale.hold_ticket, true));
  const proxy::HoldState refused = b.proxy.hold_state("s1", stale.hold_ticket);
  EXPECT_EQ(refused.outcome, proxy::HoldOutcome::kRefused);
  EXPECT_EQ(refused.reason, "policy changed while held");
  // Held again under the new policy, approved: through.
  const proxy::RequestDecision retry = b.proxy.decide_request(delete_request("/repos/stale"));
  ASSERT_NE(retry.hold_ticket, 0u);
  ASSERT_TRUE(b.approvals.decide(retry.hold_ticket, true));
  EXPECT_EQ(b.proxy.hold_state("s1", retry.hold_ticket).outcome, proxy::HoldOutcome::kApproved);
}

TEST(SessionProxyPolicyAsk, AnUnansweredHoldIsRefusedAndAudited) {
  Broker b(0ms);  // every hold expires at once
  b.sessions.put("s1", policy(), 0);
  const proxy::RequestDecision held = b.proxy.decide_request(delete_request("/repos/a"));
  ASSERT_NE(held.hold_ticket, 0u);
  const size_t before = b.records().size();
  const proxy::HoldState s = b.proxy.hold_state("s1", held.hold_ticket);
  EXPECT_EQ(s.outcome, proxy::HoldOutcome::kRefused);
  EXPECT_EQ(s.reason, "approval timed out");
  EXPECT_EQ(b.events_since(before), std::vector<std::string>{"egress:ask_timeout"});
}

// Issue 32: a guest cannot fill the operators' approval list: past its
// share of held requests its next "ask" is 429 at once (audited), while
// another session's is still held.
TEST(SessionProxyPolicyAsk, ASessionPastItsShareOfHeldRequestsIs429) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  b.sessions.put("s2", policy(), 1);
  for (size_t i = 0; i < ApprovalBook::kDefaultMaxHeldPerSession; ++i)
    ASSERT_NE(b.proxy.decide_request(delete_request("/repos/" + std::to_string(i))).hold_ticket, 0u) << i;
  const size_t before = b.records().size();
  const proxy::RequestDecision refused = b.proxy.decide_request(delete_request("/repos/more"));
  EXPECT_FALSE(refused.allow);
  EXPECT_EQ(refused.hold_ticket, 0u);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.reason, "too many requests awaiting approval");
  EXPECT_EQ(b.events_since(before).size(), 1u);
  EXPECT_EQ(b.approvals.pending().size(), ApprovalBook::kDefaultMaxHeldPerSession);
  // The control: another session's request is held.
  proxy::RequestFacts other = delete_request("/repos/a");
  other.session = "s2";
  EXPECT_NE(b.proxy.decide_request(other).hold_ticket, 0u);
}

// A standing approval lets a matching "ask" through without a hold (audited
// as approved by that grant); another path, method or session is still held,
// and a revoked grant covers nothing.
TEST(SessionProxyPolicyAsk, ALiveGrantPassesOnlyTheRequestsItCovers) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  const Grant g =
      b.approvals.grants().create({"s1", "https", "DELETE", "api.github.com", "/repos/a", false}, 60s, 0, 0);
  const size_t before = b.records().size();
  const proxy::RequestDecision passed = b.proxy.decide_request(delete_request("/repos/a"));
  EXPECT_TRUE(passed.allow);
  EXPECT_EQ(passed.hold_ticket, 0u);
  EXPECT_TRUE(b.approvals.pending().empty());
  const auto records = b.records();
  ASSERT_EQ(records.size(), before + 1);
  EXPECT_EQ(records.back().event, "egress:approved");
  EXPECT_EQ(records.back().detail["grant"], g.id);
  EXPECT_EQ(records.back().detail["by"], "grant");
  // Not covered: another path; plain HTTP (another scheme).
  EXPECT_NE(b.proxy.decide_request(delete_request("/repos/b")).hold_ticket, 0u);
  proxy::RequestFacts plain = delete_request("/repos/a");
  plain.sni.reset();
  plain.port = 80;
  EXPECT_NE(b.proxy.decide_request(plain).hold_ticket, 0u);
  ASSERT_TRUE(b.approvals.grants().revoke(g.id));
  EXPECT_NE(b.proxy.decide_request(delete_request("/repos/a")).hold_ticket, 0u);
}

// What the operator is shown of a held request: header names and a body
// preview with the policy's secrets redacted, in the book and in egress:ask.
TEST(SessionProxyPolicyAsk, TheHeldRequestsPreviewCarriesNoSecret) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  proxy::RequestFacts f = delete_request("/repos/a");
  f.header_names = {"host", "content-type", "authorization"};
  f.body_preview = std::string("{\"token\":\"") + kToken + "\",\n\"x\":1}";
  const size_t before = b.records().size();
  ASSERT_NE(b.proxy.decide_request(f).hold_ticket, 0u);
  const auto pending = b.approvals.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].header_names, f.header_names);
  EXPECT_EQ(pending[0].body_preview, "{\"token\":\"<redacted>\",\\x0a\"x\":1}");
  const auto records = b.records();
  ASSERT_EQ(records.size(), before + 1);
  EXPECT_EQ(records.back().event, "egress:ask");
  EXPECT_EQ(records.back().detail["body_preview"], pending[0].body_preview);
  EXPECT_EQ(records.back().detail["header_names"], nlohmann::json(f.header_names));
  EXPECT_EQ(records.back().detail.dump().find(kToken), std::string::npos);
}

TEST(SessionProxyPolicyAsk, PlainHttpHoldsAreListedAsHttp) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  proxy::RequestFacts plain = delete_request("/repos/b");
  plain.sni.reset();
  plain.port = 80;
  ASSERT_NE(b.proxy.decide_request(plain).hold_ticket, 0u);
  ASSERT_EQ(b.approvals.pending().size(), 1u);
  EXPECT_EQ(b.approvals.pending()[0].scheme, "http");
}

// ---- Identity ---------------------------------------------------------------

TEST(SessionProxyPolicyIdentity, InjectedOnlyForTheRuleThatAllowedTheRequest) {
  Broker b;
  b.sessions.put("s1", policy(), 0);
  proxy::RequestFacts f = github_request();
  f.sni = f.host_header = "api.stripe.com";
  f.method = "POST";
  f.path = "/v1/charges";
  const proxy::RequestDecision d = b.proxy.decide_request(f);
  ASSERT_TRUE(d.allow);
  ASSERT_TRUE(d.rule);
  std::optional<proxy::Injection> inj = b.proxy.injection_for("s1", *d.rule);
  ASSERT_TRUE(inj);
  EXPECT_EQ(inj->header, "Authorization");
  EXPECT_TRUE(inj->value == std::string("Bearer ") + kToken);  // never printed
  EXPECT_EQ(inj->strip, (std::vector<std::string>{"Authorization", "Proxy-Authorization"}));
  ASSERT_EQ(inj->scrub.size(), 1u);
  EXPECT_TRUE(inj->scrub[0] == kToken);
  // Every secret the session could inject, for scrubbing: with the verdict
  // on a connection's first request only.
  EXPECT_TRUE(d.session_secrets.empty());
  f.want_session_secrets = true;
  const proxy::RequestDecision first = b.proxy.decide_request(f);
  const auto& secrets = first.session_secrets;
  ASSERT_EQ(secrets.size(), 1u);
  EXPECT_EQ(secrets[0].identity, "stripe");
  proxy::RequestFacts ghost = f;
  ghost.session = "ghost";
  EXPECT_TRUE(b.proxy.decide_request(ghost).session_secrets.empty());
  // Refused: another session, a rule without identity, a rule changed since.
  EXPECT_FALSE(b.proxy.injection_for("ghost", *d.rule));
  EXPECT_FALSE(b.proxy.injection_for("s1", proxy::RuleRef{0, ""}));
  EXPECT_FALSE(b.proxy.injection_for("s1", proxy::RuleRef{0, "stripe"}));
  b.sessions.put("s1", R"({"policy":{"allow":[{"host":"a.example"},{"host":"b.example"},
      {"host":"api.stripe.com"}]},"resources":{"stripe":{"accessToken":"x"}}})",
                 0);
  EXPECT_FALSE(b.proxy.injection_for("s1", *d.rule));
  EXPECT_TRUE(b.proxy.decide_request(f).session_secrets.empty());
}

// ---- What the proxy reports, as audit events --------------------------------

TEST(SessionProxyPolicyTable, RequestAndConnectionSummariesAreAudited) {
  struct Row {
    const char* name;
    proxy::RequestSummary summary;
    std::vector<std::string> events;
  };
  proxy::RequestSummary allowed{.session = "s1",
                                .host = "api.github.com",
                                .method = "GET",
                                .path = "/repos/a",
                                .status = 200,
                                .forwarded = true,
                                .upstream = "198.18.0.10:443"};
  proxy::RequestSummary refused{
      .session = "s1", .host = "api.github.com", .status = 400, .error = "malformed"};
  proxy::RequestSummary unreachable = allowed;
  unreachable.status = 502;
  unreachable.error = "upstream unreachable";
  unreachable.upstream.clear();
  unreachable.upstream_failed = true;
  proxy::RequestSummary reflected = allowed;
  reflected.identity = "stripe";
  reflected.reflected_in_body = 2;
  reflected.reflected_encodings = {"raw", "base64"};
  reflected.reflected_identities = {"stripe"};
  const std::vector<Row> rows = {
      {"forwarded", allowed, {"egress:allow"}},
      {"refused by the proxy", refused, {"egress:deny"}},
      {"no upstream connected", unreachable, {"egress:error"}},
      {"secret reflected", reflected, {"egress:allow", "secret:reflected"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Broker b;
    b.proxy.on_request_done(row.summary);
    EXPECT_EQ(b.events_since(0), row.events);
  }
  Broker b;
  b.proxy.on_request_done(reflected);
  const AuditRecord r = b.records().back();
  EXPECT_EQ(r.detail["where"], nlohmann::json::array({"body"}));
  EXPECT_EQ(r.detail["encodings"], nlohmann::json::array({"raw", "base64"}));
  EXPECT_EQ(r.detail["matches"], 2);

  struct Closed {
    const char* name;
    proxy::ConnectionSummary summary;
    std::string event;
  };
  const std::vector<Closed> closed = {
      {"refused at connect", {.session = "s1", .host = "a", .refused = "local address"}, "egress:deny"},
      {"nothing connected", {.session = "s1", .host = "a", .end = "upstream unreachable"}, "egress:error"},
      {"spliced",
       {.session = "s1", .host = "a", .end = "closed", .upstream = "198.18.0.12:443"},
       "egress:allow"},
  };
  for (const Closed& c : closed) {
    SCOPED_TRACE(c.name);
    Broker fresh;
    fresh.proxy.on_closed(c.summary);
    EXPECT_EQ(fresh.events_since(0), std::vector<std::string>{c.event});
  }
}

// A disk that stops committing: the proxy's and DNS's verdicts never wait
// for it (post), and once the backlog passes the audit's high-water mark
// nothing more crosses (503, reset, refused name) until it drains. Positive
// control first: the same requests pass while the audit keeps up.
TEST(SessionProxyPolicyAudit, ACrossingTheAuditCannotRecordIsRefusedAndNothingWaitsForTheDisk) {
  std::mutex gate;
  std::unique_lock stuck(gate, std::defer_lock);
  Broker b(
      std::chrono::hours(1), [&gate] { std::lock_guard wait(gate); }, /*high_water=*/4);
  b.sessions.put("s1", policy(), 0);
  proxy::ConnectionFacts conn;
  conn.guest = endpoint("198.19.0.2", 40000);
  conn.original_dst = endpoint("198.18.0.20", 443);
  conn.tls = true;
  conn.sni = "api.github.com";

  EXPECT_TRUE(b.proxy.decide_request(github_request()).allow);
  EXPECT_EQ(b.proxy.decide(conn).mode, proxy::ConnectionMode::kIntercept);
  EXPECT_TRUE(b.dns.decide({"s1", nullptr}, "api.github.com").allow);

  stuck.lock();  // the writer blocks in its next commit
  const auto start = std::chrono::steady_clock::now();
  int allowed = 0;
  proxy::RequestDecision last;
  for (int i = 0; i < 20; ++i) {
    proxy::RequestFacts denied = github_request();
    denied.path = "/admin";  // each audited: egress:deny
    last = b.proxy.decide_request(denied);
    if (b.proxy.decide_request(github_request()).allow) ++allowed;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));  // nothing waited
  EXPECT_LT(allowed, 20);
  const proxy::RequestDecision refused = b.proxy.decide_request(github_request());
  EXPECT_FALSE(refused.allow);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.reason, "audit unavailable");
  EXPECT_EQ(b.proxy.decide(conn).mode, proxy::ConnectionMode::kReset);
  EXPECT_FALSE(b.dns.decide({"s1", nullptr}, "api.github.com").allow);

  stuck.unlock();  // the disk is back: the backlog drains, crossings resume
  ASSERT_TRUE(b.audit.flush());
  EXPECT_TRUE(b.proxy.decide_request(github_request()).allow);
  EXPECT_TRUE(b.dns.decide({"s1", nullptr}, "api.github.com").allow);
  EXPECT_TRUE(b.audit.verify().ok);
}

}  // namespace
}  // namespace zn::broker::test
