// SessionDnsPolicy as tables, without root: each query goes through the real
// QueryHandler (the responder's decision, transport-free: an inline post and
// the configured resolver's static names complete it at once), with the
// rcode, answers and audit event it must give. Today's behaviour, as
// tests/integration/zerod_test.cpp sees it from a guest: denied and unknown
// names NXDOMAIN, strangers REFUSED. Every refusal has a positive control
// on the same path.
#include <gtest/gtest.h>

#include <set>

#include "broker/session/fake_directory.h"
#include "support/dns_messages.h"
#include "userspace/dns/query_handler.h"

namespace zn::broker::test {
namespace {

using dns::test::make_query;
using dns::test::parse_reply;
using dns::test::Reply;

const std::string kPolicy = R"({"policy":{"allow":[
    {"host":"api.github.com","methods":["GET"]},
    {"host":"*.npmjs.org"},
    {"host":"*.example.com"},
    {"host":"db.internal","port":5432,"proto":"tcp"}],
  "deny":[{"host":"evil.example"},{"host":"bad.example.com"}]}})";

struct DnsRow {
  const char* name;
  const char* path;  // rows of one path: refused and allowed
  std::string source;
  std::string qname;
  ldns_rr_type type;
  int rcode;
  std::vector<std::string> answers;
  std::string event;  // "" for none
  std::string audited_name;
  std::string reason;  // dns:deny
};

Reply ask(dns::QueryHandler& h, const std::string& source, const std::string& qname, ldns_rr_type type) {
  std::optional<dns::Bytes> out;
  bool called = false;
  h.handle(make_query(qname, {.type = type}), endpoint(source, 40000), dns::Transport::Udp,
           [&](std::optional<dns::Bytes> r) {
             called = true;
             out = std::move(r);
           });
  if (!called || !out) throw std::runtime_error("no reply");
  auto reply = parse_reply(*out);
  if (!reply) throw std::runtime_error("unparseable reply");
  return *reply;
}

TEST(SessionDnsPolicyTable, QueriesThroughTheHandler) {
  const std::string g4 = "198.19.0.2", g6 = "2001:db8:19::2";
  const auto A = LDNS_RR_TYPE_A, AAAA = LDNS_RR_TYPE_AAAA;
  const int kNoError = LDNS_RCODE_NOERROR, kNxDomain = LDNS_RCODE_NXDOMAIN, kRefused = LDNS_RCODE_REFUSED;
  const std::vector<DnsRow> rows = {
      // A source no session has is refused, unaudited.
      {"unknown source", "source", "198.19.9.2", "api.github.com", A, kRefused, {}, "", "", ""},
      {"unknown source, v6", "source", "2001:db8:19:9::2", "api.github.com", A, kRefused, {}, "", "", ""},
      {"gateway address", "source", "198.19.0.1", "api.github.com", A, kRefused, {}, "", "", ""},
      {"the session's v4 source",
       "source",
       g4,
       "api.github.com",
       A,
       kNoError,
       {"198.18.0.10"},
       "dns:allow",
       "api.github.com",
       ""},
      {"the session's v6 source",
       "source",
       g6,
       "api.github.com",
       A,
       kNoError,
       {"198.18.0.10"},
       "dns:allow",
       "api.github.com",
       ""},

      // Names the policy does not allow: NXDOMAIN, audited, never resolved.
      {"deny rule",
       "name",
       g4,
       "evil.example",
       A,
       kNxDomain,
       {},
       "dns:deny",
       "evil.example",
       "deny rule 0 (evil.example)"},
      {"deny rule in another case",
       "name",
       g4,
       "EVIL.Example",
       A,
       kNxDomain,
       {},
       "dns:deny",
       "evil.example",
       "deny rule 0 (evil.example)"},
      {"deny beats a wildcard allow",
       "name",
       g4,
       "bad.example.com",
       A,
       kNxDomain,
       {},
       "dns:deny",
       "bad.example.com",
       "deny rule 1 (bad.example.com)"},
      {"name not in policy",
       "name",
       g4,
       "api.openai.com",
       A,
       kNxDomain,
       {},
       "dns:deny",
       "api.openai.com",
       "default deny"},
      {"a wildcard's own apex",
       "name",
       g4,
       "npmjs.org",
       A,
       kNxDomain,
       {},
       "dns:deny",
       "npmjs.org",
       "default deny"},
      {"exfiltration in labels",
       "name",
       g4,
       "c2VjcmV0.exfil.attacker.test",
       AAAA,
       kNxDomain,
       {},
       "dns:deny",
       "c2vjcmv0.exfil.attacker.test",
       "default deny"},
      {"allowed name",
       "name",
       g4,
       "api.github.com",
       A,
       kNoError,
       {"198.18.0.10"},
       "dns:allow",
       "api.github.com",
       ""},
      {"allowed name in another case",
       "name",
       g4,
       "API.GitHub.COM",
       A,
       kNoError,
       {"198.18.0.10"},
       "dns:allow",
       "api.github.com",
       ""},
      {"allowed name with a trailing dot",
       "name",
       g4,
       "api.github.com.",
       A,
       kNoError,
       {"198.18.0.10"},
       "dns:allow",
       "api.github.com",
       ""},
      {"allowed under a wildcard",
       "name",
       g4,
       "good.example.com",
       A,
       kNoError,
       {"198.18.0.20"},
       "dns:allow",
       "good.example.com",
       ""},
      {"allowed, AAAA",
       "name",
       g4,
       "registry.npmjs.org",
       AAAA,
       kNoError,
       {"2001:db8:18::12"},
       "dns:allow",
       "registry.npmjs.org",
       ""},
      {"an L4 rule's name",
       "name",
       g4,
       "db.internal",
       A,
       kNoError,
       {"198.18.0.13"},
       "dns:allow",
       "db.internal",
       ""},
      // Allowed but unknown to the resolver: its NXDOMAIN, nothing recorded.
      {"allowed name without an address", "name", g4, "nothere.npmjs.org", A, kNxDomain, {}, "", "", ""},
  };
  std::map<std::string, std::set<bool>> outcomes;
  for (const DnsRow& row : rows) {
    SCOPED_TRACE(row.name);
    Broker b;
    b.sessions.put("s1", kPolicy, 0);
    dns::QueryHandler h(b.dns, b.resolver, dns::HandlerConfig{}, [](std::function<void()> f) { f(); });
    const Reply r = ask(h, row.source, row.qname, row.type);
    EXPECT_EQ(r.rcode, row.rcode);
    EXPECT_EQ(r.addresses, row.answers);
    const std::vector<AuditRecord> records = b.records();
    ASSERT_EQ(records.size(), row.event.empty() ? 0u : 1u);
    if (!row.event.empty()) {
      EXPECT_EQ(records[0].event, row.event);
      EXPECT_EQ(records[0].sid, "s1");
      EXPECT_EQ(records[0].detail["name"], row.audited_name);
      if (row.event == "dns:deny") {
        EXPECT_EQ(records[0].detail["reason"], row.reason);
      }
    }
    // What the proxy pins a name's upstream to: exactly what was answered.
    const std::string lower = row.audited_name.empty() ? row.qname : row.audited_name;
    std::vector<std::string> recorded;
    for (const auto& a : b.dns.answers("s1", lower)) recorded.push_back(a.to_string());
    EXPECT_EQ(recorded, row.answers);
    outcomes[row.path].insert(r.rcode == kNoError);
  }
  for (const auto& [path, seen] : outcomes)
    EXPECT_TRUE(!seen.count(false) || seen.count(true)) << path << ": no positive control";
}

// The policy's own answers, for the forms the handler never passes (it
// lowercases and drops the root dot) but the policy accepts anyway.
TEST(SessionDnsPolicyTable, DecisionsOnNameVariants) {
  struct Row {
    std::string session, qname;
    bool allow;
    std::string reason;
  };
  const std::vector<Row> rows = {
      {"s1", "api.github.com", true, ""},
      {"s1", "api.github.com.", true, ""},
      {"s1", "API.GITHUB.COM", true, ""},
      {"s1", "Registry.NPMJS.org.", true, ""},
      {"s1", "evil.example.", false, "deny rule 0 (evil.example)"},
      {"s1", "EVIL.EXAMPLE", false, "deny rule 0 (evil.example)"},
      {"s1", "x.bad.example.com", true, ""},  // an exact deny covers that name only
      {"s1", "api.github.com..", false, "invalid host name"},
      {"s1", "", false, "invalid host name"},
      {"ghost", "api.github.com", false, "no session"},
  };
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  for (const Row& row : rows) {
    SCOPED_TRACE(row.session + " " + row.qname);
    const dns::DnsDecision d = b.dns.decide(row.session, row.qname);
    EXPECT_EQ(d.allow, row.allow);
    EXPECT_EQ(d.reason, row.reason);
  }
  EXPECT_TRUE(b.records().empty());  // deciding audits nothing; on_denied does
}

TEST(SessionDnsPolicy, SourcesMapToTheirOwnSession) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.put("s2", kPolicy, 1);
  EXPECT_EQ(b.dns.session_of(endpoint("198.19.0.2", 53000)), "s1");
  EXPECT_EQ(b.dns.session_of(endpoint("2001:db8:19::2", 53000)), "s1");
  EXPECT_EQ(b.dns.session_of(endpoint("198.19.1.2", 53000)), "s2");
  EXPECT_EQ(b.dns.session_of(endpoint("2001:db8:19:1::2", 53000)), "s2");
  EXPECT_EQ(b.dns.session_of(endpoint("198.19.2.2", 53000)), std::nullopt);
  EXPECT_EQ(b.dns.session_of(endpoint("198.18.0.10", 53000)), std::nullopt);
  sockaddr_storage unix_source{};
  unix_source.ss_family = AF_UNIX;
  EXPECT_EQ(b.dns.session_of(unix_source), std::nullopt);
}

TEST(SessionDnsPolicy, AnswersArePinnedPerSessionUntilForgotten) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.put("s2", kPolicy, 1);
  dns::QueryHandler h(b.dns, b.resolver, dns::HandlerConfig{}, [](std::function<void()> f) { f(); });
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NOERROR);
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_AAAA).rcode, LDNS_RCODE_NOERROR);
  std::vector<std::string> told;
  for (const auto& a : b.dns.answers("s1", "registry.npmjs.org")) told.push_back(a.to_string());
  // Accumulated across A and AAAA, without duplicates.
  EXPECT_EQ(told, (std::vector<std::string>{"198.18.0.12", "2001:db8:18::12"}));
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(b.dns.answers("s1", "registry.npmjs.org").size(), 2u);
  EXPECT_TRUE(b.dns.answers("s2", "registry.npmjs.org").empty());  // told to s1, not s2
  b.dns.forget("s1");
  EXPECT_TRUE(b.dns.answers("s1", "registry.npmjs.org").empty());
}

}  // namespace
}  // namespace zn::broker::test
