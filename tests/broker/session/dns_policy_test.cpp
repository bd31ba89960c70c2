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
    for (const auto& a : b.dns.answers(*b.sessions.get("s1"), lower)) recorded.push_back(a.to_string());
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
    const dns::DnsDecision d = b.dns.decide({row.session, nullptr}, row.qname);
    EXPECT_EQ(d.allow, row.allow);
    EXPECT_EQ(d.reason, row.reason);
  }
  EXPECT_TRUE(b.records().empty());  // deciding audits nothing; on_denied does
}

TEST(SessionDnsPolicy, SourcesMapToTheirOwnSession) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.put("s2", kPolicy, 1);
  auto id_at = [&b](const std::string& address) -> std::optional<std::string> {
    auto s = b.dns.session_of(endpoint(address, 53000));
    if (!s) return std::nullopt;
    EXPECT_EQ(s->owner, b.sessions.get(s->id));  // the snapshot the query keeps
    return s->id;
  };
  EXPECT_EQ(id_at("198.19.0.2"), "s1");
  EXPECT_EQ(id_at("2001:db8:19::2"), "s1");
  EXPECT_EQ(id_at("198.19.1.2"), "s2");
  EXPECT_EQ(id_at("2001:db8:19:1::2"), "s2");
  EXPECT_EQ(id_at("198.19.2.2"), std::nullopt);
  EXPECT_EQ(id_at("198.18.0.10"), std::nullopt);
  sockaddr_storage unix_source{};
  unix_source.ss_family = AF_UNIX;
  EXPECT_FALSE(b.dns.session_of(unix_source).has_value());
}

TEST(SessionDnsPolicy, AnswersArePinnedPerSessionUntilItIsDeleted) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.put("s2", kPolicy, 1);
  dns::QueryHandler h(b.dns, b.resolver, dns::HandlerConfig{}, [](std::function<void()> f) { f(); });
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NOERROR);
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_AAAA).rcode, LDNS_RCODE_NOERROR);
  std::vector<std::string> told;
  for (const auto& a : b.dns.answers(*b.sessions.get("s1"), "registry.npmjs.org"))
    told.push_back(a.to_string());
  // Accumulated across A and AAAA, without duplicates.
  EXPECT_EQ(told, (std::vector<std::string>{"198.18.0.12", "2001:db8:18::12"}));
  ASSERT_EQ(ask(h, "198.19.0.2", "registry.npmjs.org", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(b.dns.answers(*b.sessions.get("s1"), "registry.npmjs.org").size(), 2u);
  // Told to s1, not s2.
  EXPECT_TRUE(b.dns.answers(*b.sessions.get("s2"), "registry.npmjs.org").empty());
  // An update keeps them (the session's one state).
  b.sessions.put("s1", kPolicy, 0);
  EXPECT_EQ(b.dns.answers(*b.sessions.get("s1"), "registry.npmjs.org").size(), 2u);
  // Deleted and created again under the same id: a new session, told nothing.
  b.sessions.remove("s1");
  b.sessions.put("s1", kPolicy, 0);
  EXPECT_TRUE(b.dns.answers(*b.sessions.get("s1"), "registry.npmjs.org").empty());
}

// A query at the resolver when its session is deleted (and a session made
// again under the same id and address): the answer the guest gets is the
// old session's, and it is never told to the new one, whose pinning would
// otherwise let the proxy connect where its policy never answered.
TEST(SessionDnsPolicy, AnAnswerInFlightAcrossADeleteNeverReachesTheNextSessionOfItsId) {
  for (const bool recreate : {true, false}) {
    SCOPED_TRACE(recreate ? "re-created" : "control: not deleted");
    Broker b;
    b.sessions.put("s1", kPolicy, 0);
    std::vector<std::function<void()>> posted;  // the resolver's completions, held back
    dns::QueryHandler h(b.dns, b.resolver, dns::HandlerConfig{},
                        [&posted](std::function<void()> f) { posted.push_back(std::move(f)); });
    std::optional<dns::Bytes> reply;
    h.handle(make_query("registry.npmjs.org", {.type = LDNS_RR_TYPE_A}), endpoint("198.19.0.2", 40000),
             dns::Transport::Udp, [&](std::optional<dns::Bytes> r) { reply = std::move(r); });
    ASSERT_EQ(h.pending(), 1u);
    const SessionPtr old_session = b.sessions.get("s1");
    if (recreate) {
      b.sessions.remove("s1");
      b.sessions.put("s1", kPolicy, 0);
    }
    for (auto& f : posted) f();
    ASSERT_TRUE(reply);
    EXPECT_EQ(parse_reply(*reply)->rcode, LDNS_RCODE_NOERROR);
    // The session the query came from was told, whichever it is now.
    EXPECT_EQ(old_session->state->answers.size(), 1u);
    EXPECT_EQ(b.dns.answers(*b.sessions.get("s1"), "registry.npmjs.org").empty(), recreate);
  }
}

// The dns:unanswered records posted since `from`.
std::vector<AuditRecord> unanswered_since(Broker& b, size_t from) {
  std::vector<AuditRecord> out;
  const auto all = b.records();
  for (size_t i = from; i < all.size(); ++i)
    if (all[i].event == "dns:unanswered") out.push_back(all[i]);
  return out;
}

// An allowed name that gets no address leaves a trace: which name, how it
// ended, whether it went upstream. An answered one is a dns:allow only.
TEST(SessionDnsPolicy, AllowedNamesWithoutAnAddressAreAudited) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  dns::QueryHandler h(b.dns, b.resolver, dns::HandlerConfig{}, [](std::function<void()> f) { f(); });
  const size_t from = b.records().size();
  // Positive control: answered, no dns:unanswered.
  ASSERT_EQ(ask(h, "198.19.0.2", "good.example.com", LDNS_RR_TYPE_A).addresses.size(), 1u);
  b.dns.flush_unanswered();
  EXPECT_TRUE(unanswered_since(b, from).empty());
  EXPECT_EQ(b.events_since(from), std::vector<std::string>{"dns:allow"});

  // Labels carrying data under the allowed wildcard: the resolver's NXDOMAIN.
  ASSERT_EQ(ask(h, "198.19.0.2", "c2VjcmV0.example.com", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NXDOMAIN);
  ASSERT_EQ(ask(h, "198.19.0.2", "c2VjcmV0.example.com", LDNS_RR_TYPE_AAAA).rcode, LDNS_RCODE_NXDOMAIN);
  // No AAAA for a name that has an A: no data from the resolver.
  ASSERT_EQ(ask(h, "198.19.0.2", "good.example.com", LDNS_RR_TYPE_AAAA).rcode, LDNS_RCODE_NOERROR);
  // A type zerod never forwards.
  ASSERT_EQ(ask(h, "198.19.0.2", "bWFpbA.example.com", LDNS_RR_TYPE_TXT).rcode, LDNS_RCODE_NOERROR);
  b.dns.flush_unanswered();
  std::map<std::string, nlohmann::json> by_name;
  for (const AuditRecord& r : unanswered_since(b, from)) {
    EXPECT_EQ(r.sid, "s1");
    by_name[r.detail.at("name").get<std::string>() + " " + r.detail.at("outcome").get<std::string>()] =
        r.detail;
  }
  // Names are case-folded, as the policy sees them.
  ASSERT_EQ(by_name.size(), 3u);
  const auto& nx = by_name.at("c2vjcmv0.example.com nxdomain");
  EXPECT_EQ(nx.at("count"), 2);  // A and AAAA, one record
  EXPECT_EQ(nx.at("forwarded"), true);
  EXPECT_EQ(by_name.at("good.example.com nodata").at("forwarded"), true);
  EXPECT_EQ(by_name.at("bwfpba.example.com nodata").at("forwarded"), false);
  // Denied names stay dns:deny, never dns:unanswered.
  const size_t before_deny = b.records().size();
  ask(h, "198.19.0.2", "c2VjcmV0.evil.example", LDNS_RR_TYPE_A);
  b.dns.flush_unanswered();
  EXPECT_EQ(b.events_since(before_deny), std::vector<std::string>{"dns:deny"});
}

// A flood of random names under an allowed wildcard is summarised: the
// records stay bounded per second whatever the flood's size, and together
// they still count every query.
TEST(SessionDnsPolicy, AFloodOfUnansweredNamesStaysRateBounded) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.put("s2", kPolicy, 1);
  // The flood gets past the session's query rate (its own tests are the
  // handler's): this is about what reaches the audit.
  dns::HandlerConfig unlimited;
  unlimited.session_rate = {.per_second = 1e9, .burst = 1e9, .max_tracked = 16};
  dns::QueryHandler h(b.dns, b.resolver, unlimited, [](std::function<void()> f) { f(); });
  const size_t from = b.records().size();
  constexpr int kFlood = 3000;
  for (int i = 0; i < kFlood; ++i) {
    // Two parent domains, and in the second half as many as there are names.
    const std::string parent = i < kFlood / 2 ? (i % 2 ? "a.example.com" : "b.example.com")
                                              : "p" + std::to_string(i) + ".example.com";
    ASSERT_EQ(ask(h, "198.19.0.2", "x" + std::to_string(i) + "." + parent, LDNS_RR_TYPE_A).rcode,
              LDNS_RCODE_NXDOMAIN);
  }
  // Positive control: the quiet session's one name is recorded by name.
  ASSERT_EQ(ask(h, "198.19.1.2", "lone.example.com", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NXDOMAIN);
  b.dns.flush_unanswered();
  const auto records = unanswered_since(b, from);
  const size_t rate = DnsOutcomeAggregator::kDefaultNamesPerSecond;
  uint64_t counted = 0;
  size_t named = 0, suffixes = 0, overflow = 0;
  bool lone = false;
  for (const AuditRecord& r : records) {
    if (r.sid == "s2") {
      lone = r.detail.value("name", "") == "lone.example.com" && r.detail.at("count") == 1;
      continue;
    }
    counted += r.detail.at("count").get<uint64_t>();
    if (r.detail.contains("name"))
      ++named;
    else if (r.detail.contains("suffix"))
      ++suffixes;
    else
      ++overflow;
  }
  EXPECT_TRUE(lone);
  EXPECT_EQ(counted, static_cast<uint64_t>(kFlood));
  EXPECT_EQ(named, rate);
  EXPECT_EQ(suffixes, rate);
  EXPECT_EQ(overflow, 1u);
  EXPECT_LE(records.size(), 2 * rate + 2);
  // The next second starts afresh: a new name is recorded by name again.
  ASSERT_EQ(ask(h, "198.19.0.2", "again.example.com", LDNS_RR_TYPE_A).rcode, LDNS_RCODE_NXDOMAIN);
  const size_t second = b.records().size();
  b.dns.flush_unanswered();
  const auto next = unanswered_since(b, second);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].detail.at("name"), "again.example.com");
}

// The proxy connects only to names the session was told; a told name pushed
// out by a flood is refused like one never asked for, and resolving it
// again makes it reachable again.
TEST(SessionDnsPolicy, AnEvictedAnswerFailsClosedUntilResolvedAgain) {
  Broker b;
  b.sessions.put("s1", kPolicy, 0);
  b.sessions.limits.dns_answers = 16;
  b.sessions.remove("s1");
  b.sessions.put("s1", kPolicy, 0);
  SessionDnsPolicy dns(b.sessions, b.audit);
  SessionProxyPolicy proxy(b.sessions, dns, b.resolver, b.audit, b.approvals, lab_guard(),
                           [&b] { return b.now; });
  dns::QueryHandler h(dns, b.resolver, dns::HandlerConfig{}, [](std::function<void()> f) { f(); });
  ASSERT_EQ(ask(h, "198.19.0.2", "good.example.com", LDNS_RR_TYPE_A).addresses.size(), 1u);
  // Positive control: told, so connectable.
  EXPECT_EQ(proxy.resolve_upstream("s1", "good.example.com").addresses.size(), 1u);
  // A flood of answered names (as a wildcard under the guest's control
  // resolves them), without the good name being used meanwhile.
  for (int i = 0; i < 100; ++i)
    dns.on_answer({"s1", nullptr}, "n" + std::to_string(i) + ".example.com",
                  {*net::IpAddress::parse("198.18.0.20")}, 60);
  EXPECT_EQ(b.sessions.get("s1")->state->answers.size(), 16u);
  EXPECT_EQ(dns.answers_evicted(), 101u - 16u);
  const auto refused = proxy.resolve_upstream("s1", "good.example.com");
  EXPECT_TRUE(refused.addresses.empty());
  EXPECT_EQ(refused.reason, "name was not resolved through governed DNS");
  // Resolved again through governed DNS: reachable again.
  ASSERT_EQ(ask(h, "198.19.0.2", "good.example.com", LDNS_RR_TYPE_A).addresses.size(), 1u);
  EXPECT_EQ(proxy.resolve_upstream("s1", "good.example.com").addresses.size(), 1u);
}

}  // namespace
}  // namespace zn::broker::test
