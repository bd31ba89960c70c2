// The governed decision on crafted packets, transport-free: an inline post
// and a synchronous static resolver make every call complete at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "support/dns_messages.h"
#include "userspace/dns/query_handler.h"
#include "userspace/dns/static_resolver.h"
#include "userspace/net/transparent_socket.h"

namespace zn::dns::test {
namespace {

// Holds results until release() (an upstream that answers later).
class DeferredResolver : public Resolver {
 public:
  void resolve(const std::string& name, QType, Callback cb) override {
    names.push_back(name);
    callbacks.push_back(std::move(cb));
  }
  std::vector<std::string> names;
  std::vector<Callback> callbacks;
};

class HandlerTest : public ::testing::Test {
 protected:
  HandlerTest()
      : resolver_(
            {{"api.allowed.test",
              {*zn::net::IpAddress::parse("198.18.0.10"), *zn::net::IpAddress::parse("2001:db8:18::10")}},
             {"long.allowed.test", {*zn::net::IpAddress::parse("198.18.0.11")}},
             {"v4only.allowed.test", {*zn::net::IpAddress::parse("198.18.0.12")}}},
            /*ttl=*/86400) {}

  std::unique_ptr<QueryHandler> make(HandlerConfig config = {}, Resolver* resolver = nullptr) {
    return std::make_unique<QueryHandler>(policy_, resolver ? *resolver : resolver_, config,
                                          [](std::function<void()> f) { f(); });
  }
  // nullopt: dropped; throws if done is never called.
  std::optional<Bytes> ask(QueryHandler& h, const Bytes& wire, Transport t = Transport::Udp) {
    bool called = false;
    std::optional<Bytes> out;
    h.handle(wire, source_, t, [&](std::optional<Bytes> r) {
      called = true;
      out = std::move(r);
    });
    if (!called) throw std::runtime_error("done not called");
    return out;
  }
  Reply ask_reply(QueryHandler& h, const Bytes& wire) {
    auto r = ask(h, wire);
    if (!r) throw std::runtime_error("dropped");
    auto p = parse_reply(*r);
    if (!p) throw std::runtime_error("unparseable reply");
    return *p;
  }

  RecordingPolicy policy_;
  StaticResolver resolver_;
  sockaddr_storage source_ = zn::net::make_endpoint("198.19.0.2", 40000);
};

TEST_F(HandlerTest, AllowedNameIsAnsweredWithStaticAddressAndRecorded) {
  auto h = make();
  Reply r = ask_reply(*h, make_query("api.allowed.test", {.id = 4242}));
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(r.id, 4242);
  EXPECT_EQ(r.addresses, std::vector<std::string>{"198.18.0.10"});
  EXPECT_EQ(r.ttls, std::vector<uint32_t>{300});  // capped from 86400
  ASSERT_EQ(policy_.answers().size(), 1u);
  EXPECT_EQ(policy_.answers()[0].session, "s1");
  EXPECT_EQ(policy_.answers()[0].qname, "api.allowed.test");
  EXPECT_EQ(policy_.answers()[0].ttl, 300u);
  EXPECT_EQ(policy_.answers()[0].addresses,
            std::vector<zn::net::IpAddress>{*zn::net::IpAddress::parse("198.18.0.10")});
  auto c = h->counters().snapshot();
  EXPECT_EQ(c.queries, 1u);
  EXPECT_EQ(c.allowed, 1u);
  EXPECT_EQ(c.denied + c.refused + c.malformed, 0u);
}

TEST_F(HandlerTest, AaaaIsAnsweredWithTheIpv6Address) {
  auto h = make();
  Reply r = ask_reply(*h, make_query("api.allowed.test", {.type = LDNS_RR_TYPE_AAAA}));
  EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(r.addresses, std::vector<std::string>{"2001:db8:18::10"});
  // A name with only IPv4 addresses: NODATA, not NXDOMAIN.
  Reply nodata = ask_reply(*h, make_query("v4only.allowed.test", {.type = LDNS_RR_TYPE_AAAA}));
  EXPECT_EQ(nodata.rcode, LDNS_RCODE_NOERROR);
  EXPECT_TRUE(nodata.addresses.empty());
  EXPECT_EQ(policy_.answers().size(), 1u);  // empty answers are not recorded
}

TEST_F(HandlerTest, ANameTheHostServesIsAnsweredLocallyNeverResolved) {
  policy_.local["cap.host.test"] = {*zn::net::IpAddress::parse("203.0.113.253"),
                                    *zn::net::IpAddress::parse("2001:db8:ca9::1")};
  auto h = make();
  Reply a = ask_reply(*h, make_query("CAP.host.test"));
  EXPECT_EQ(a.rcode, LDNS_RCODE_NOERROR);
  EXPECT_EQ(a.addresses, std::vector<std::string>{"203.0.113.253"});
  EXPECT_EQ(a.ttls, std::vector<uint32_t>{60});
  Reply aaaa = ask_reply(*h, make_query("cap.host.test", {.type = LDNS_RR_TYPE_AAAA}));
  EXPECT_EQ(aaaa.addresses, std::vector<std::string>{"2001:db8:ca9::1"});
  // Other types: NODATA, as for any allowed name.
  EXPECT_TRUE(ask_reply(*h, make_query("cap.host.test", {.type = LDNS_RR_TYPE_TXT})).addresses.empty());
  EXPECT_EQ(resolver_.calls(), 0u);
  ASSERT_EQ(policy_.answers().size(), 2u);  // recorded (and audited) like a resolved answer
  EXPECT_EQ(policy_.answers()[0].qname, "cap.host.test");
  // The positive control: a name the host does not serve goes to the resolver.
  EXPECT_EQ(ask_reply(*h, make_query("api.allowed.test")).addresses, std::vector<std::string>{"198.18.0.10"});
  EXPECT_EQ(resolver_.calls(), 1u);
}

TEST_F(HandlerTest, NamesAreCaseInsensitive) {
  auto h = make();
  Reply r = ask_reply(*h, make_query("API.ALLOWED.Test."));
  EXPECT_EQ(r.addresses, std::vector<std::string>{"198.18.0.10"});
  EXPECT_EQ(r.qname, "API.ALLOWED.Test.");
  EXPECT_EQ(policy_.decided().back(), "api.allowed.test");
  Reply denied = ask_reply(*h, make_query("SECRET.Evil.TEST"));
  EXPECT_EQ(denied.rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(policy_.denials().back().qname, "secret.evil.test");
}

TEST_F(HandlerTest, DeniedNameIsNxdomainReportedAndNeverResolved) {
  auto h = make();
  Reply r = ask_reply(*h, make_query("c2VjcmV0.exfil.evil.test"));
  EXPECT_EQ(r.rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_TRUE(r.addresses.empty());
  ASSERT_EQ(policy_.denials().size(), 1u);
  EXPECT_EQ(policy_.denials()[0].session, "s1");
  EXPECT_EQ(policy_.denials()[0].qname, "c2vjcmv0.exfil.evil.test");  // lowercased
  EXPECT_EQ(policy_.denials()[0].reason, "default deny");
  EXPECT_EQ(resolver_.calls(), 0u);
  // Every type is denied, and none reaches the resolver either.
  for (auto t : {LDNS_RR_TYPE_AAAA, LDNS_RR_TYPE_TXT, LDNS_RR_TYPE_MX, LDNS_RR_TYPE_ANY})
    EXPECT_EQ(ask_reply(*h, make_query("x.evil.test", {.type = t})).rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(resolver_.calls(), 0u);
  EXPECT_EQ(h->counters().snapshot().denied, 5u);
}

TEST_F(HandlerTest, DeniedRcodeCanBeRefused) {
  auto h = make({.denied_rcode = Rcode::Refused});
  EXPECT_EQ(ask_reply(*h, make_query("evil.test")).rcode, LDNS_RCODE_REFUSED);
  EXPECT_EQ(policy_.denials().size(), 1u);
}

TEST_F(HandlerTest, UnknownSourceIsRefusedWithoutAskingPolicy) {
  policy_.sessions = {{"198.19.5.2", "other"}};
  auto h = make();
  Reply r = ask_reply(*h, make_query("api.allowed.test"));
  EXPECT_EQ(r.rcode, LDNS_RCODE_REFUSED);
  EXPECT_TRUE(policy_.decided().empty());
  EXPECT_TRUE(policy_.denials().empty());
  EXPECT_EQ(resolver_.calls(), 0u);
  EXPECT_EQ(h->counters().snapshot().refused, 1u);
}

TEST_F(HandlerTest, OtherTypesForAllowedNamesAreNodataAndNotForwarded) {
  auto h = make();
  for (auto t : {LDNS_RR_TYPE_TXT, LDNS_RR_TYPE_MX, LDNS_RR_TYPE_CNAME, static_cast<ldns_rr_type>(65)}) {
    Reply r = ask_reply(*h, make_query("api.allowed.test", {.type = t}));
    EXPECT_EQ(r.rcode, LDNS_RCODE_NOERROR);
    EXPECT_TRUE(r.addresses.empty());
  }
  EXPECT_EQ(resolver_.calls(), 0u);
}

TEST_F(HandlerTest, AllowedButUnknownNameIsNxdomainFromResolver) {
  auto h = make();
  EXPECT_EQ(ask_reply(*h, make_query("nothing.allowed.test")).rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(resolver_.calls(), 1u);
  EXPECT_TRUE(policy_.denials().empty());
}

TEST_F(HandlerTest, ResolverFailureIsServfailAndCounted) {
  DeferredResolver deferred;
  auto h = make({}, &deferred);
  std::optional<Bytes> out;
  bool called = false;
  h->handle(make_query("api.allowed.test"), source_, Transport::Udp, [&](std::optional<Bytes> r) {
    called = true;
    out = std::move(r);
  });
  EXPECT_FALSE(called);
  EXPECT_EQ(h->pending(), 1u);
  ASSERT_EQ(deferred.names, std::vector<std::string>{"api.allowed.test"});
  deferred.callbacks[0](ResolveResult{Rcode::ServFail, {}, 0});
  ASSERT_TRUE(called);
  EXPECT_EQ(parse_reply(*out)->rcode, LDNS_RCODE_SERVFAIL);
  EXPECT_EQ(h->counters().snapshot().upstream_failures, 1u);
  EXPECT_EQ(h->pending(), 0u);
}

// Every allowed query that gets no address is reported (for the audit),
// with whether its name went upstream; an answered one is not.
TEST_F(HandlerTest, EveryAllowedQueryWithoutAnAddressIsReported) {
  auto h = make();
  // Positive control: answered, reported as an answer only.
  EXPECT_EQ(ask_reply(*h, make_query("api.allowed.test")).addresses.size(), 1u);
  EXPECT_TRUE(policy_.unanswered().empty());
  struct Case {
    std::string qname;
    ldns_rr_type type;
    int rcode;
    NoAnswer why;
    bool forwarded;
  };
  const std::vector<Case> cases = {
      {"x9f2.nothing.allowed.test", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, NoAnswer::NxDomain, true},
      {"y7c1.nothing.allowed.test", LDNS_RR_TYPE_AAAA, LDNS_RCODE_NXDOMAIN, NoAnswer::NxDomain, true},
      {"v4only.allowed.test", LDNS_RR_TYPE_AAAA, LDNS_RCODE_NOERROR, NoAnswer::NoData, true},
      {"data-in-txt.allowed.test", LDNS_RR_TYPE_TXT, LDNS_RCODE_NOERROR, NoAnswer::NoData, false},
      {"a\\.b.allowed.test", LDNS_RR_TYPE_A, LDNS_RCODE_NXDOMAIN, NoAnswer::NxDomain, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    SCOPED_TRACE(c.qname);
    EXPECT_EQ(ask_reply(*h, make_query(c.qname, {.type = c.type})).rcode, c.rcode);
    ASSERT_EQ(policy_.unanswered().size(), i + 1);
    const auto u = policy_.unanswered().back();
    EXPECT_EQ(u.session, "s1");
    EXPECT_EQ(u.why, c.why);
    EXPECT_EQ(u.forwarded, c.forwarded);
  }
  // An upstream failure: SERVFAIL, reported as an error.
  DeferredResolver deferred;
  auto failing = make({}, &deferred);
  bool called = false;
  failing->handle(make_query("z0.allowed.test"), source_, Transport::Udp,
                  [&](std::optional<Bytes>) { called = true; });
  deferred.callbacks.at(0)(ResolveResult{Rcode::ServFail, {}, 0});
  ASSERT_TRUE(called);
  ASSERT_EQ(policy_.unanswered().size(), cases.size() + 1);
  EXPECT_EQ(policy_.unanswered().back().qname, "z0.allowed.test");
  EXPECT_EQ(policy_.unanswered().back().why, NoAnswer::Error);
  EXPECT_TRUE(policy_.unanswered().back().forwarded);
  // A denied name is a denial, not an unanswered query.
  ask_reply(*h, make_query("secret.evil.test"));
  EXPECT_EQ(policy_.unanswered().size(), cases.size() + 1);
}

TEST_F(HandlerTest, LateResolverCallbackAfterHandlerIsGoneIsHarmless) {
  DeferredResolver deferred;
  auto alive = std::make_shared<bool>(true);
  int dropped_by_gate = 0, answered = 0;
  auto gate = [alive, &dropped_by_gate](std::function<void()> f) {
    if (*alive)
      f();
    else
      ++dropped_by_gate;
  };
  // Positive control: while the handler lives, the same path answers.
  {
    QueryHandler h(policy_, deferred, {}, gate);
    h.handle(make_query("api.allowed.test"), source_, Transport::Udp,
             [&](std::optional<Bytes>) { ++answered; });
    deferred.callbacks.at(0)(ResolveResult{Rcode::NoError, {*zn::net::IpAddress::parse("198.18.0.10")}, 5});
    EXPECT_EQ(answered, 1);
    EXPECT_EQ(h.pending(), 0u);
  }
  {
    QueryHandler h(policy_, deferred, {}, gate);
    h.handle(make_query("api.allowed.test"), source_, Transport::Udp,
             [&](std::optional<Bytes>) { ++answered; });
    EXPECT_EQ(h.pending(), 1u);
    *alive = false;  // what the responder's gate does on shutdown
  }
  // The handler is gone: its callback must reach the gate, which drops it,
  // and never the destroyed handler or the query's reply function.
  deferred.callbacks.at(1)(ResolveResult{Rcode::NoError, {*zn::net::IpAddress::parse("198.18.0.10")}, 5});
  EXPECT_EQ(dropped_by_gate, 1);
  EXPECT_EQ(answered, 1);
}

TEST_F(HandlerTest, AllowedNamesNeedingEscapesAreNotResolved) {
  policy_.allowed_suffixes = {"allowed.test"};
  auto h = make();
  // One label "x.y" (an escaped dot) and a label with a space under an allowed suffix.
  EXPECT_EQ(ask_reply(*h, make_query("x\\.y.allowed.test")).rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(ask_reply(*h, make_query("a\\032b.allowed.test")).rcode, LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(resolver_.calls(), 0u);
}

// Broker code that throws is answered SERVFAIL, never unwinds into the loop.
// Issue 32: one session's flood neither fills the resolver's shared queue
// nor spends another session's rate. Sessions by source address.
class SessionShareTest : public HandlerTest {
 protected:
  SessionShareTest() { policy_.sessions = {{"198.19.0.2", "flood"}, {"198.19.0.3", "quiet"}}; }
  sockaddr_storage quiet_ = zn::net::make_endpoint("198.19.0.3", 40000);
  // The rcode of one query of `from` (-1: not answered yet: at the resolver).
  int rcode_of(QueryHandler& h, const std::string& name, const sockaddr_storage& from) {
    int rcode = -1;
    h.handle(make_query(name), from, Transport::Udp, [&](std::optional<Bytes> r) {
      auto p = r ? parse_reply(*r) : std::nullopt;
      rcode = p ? p->rcode : -2;
    });
    return rcode;
  }
};

TEST_F(SessionShareTest, ASessionsQueriesAtTheResolverAreCappedOthersAreNot) {
  DeferredResolver deferred;
  HandlerConfig config;
  config.max_pending_per_session = 3;
  auto h = make(config, &deferred);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rcode_of(*h, "n" + std::to_string(i) + ".allowed.test", source_), -1);
  // The fourth of the same session is refused at once, never forwarded.
  EXPECT_EQ(rcode_of(*h, "n3.allowed.test", source_), LDNS_RCODE_REFUSED);
  EXPECT_EQ(deferred.names.size(), 3u);
  EXPECT_EQ(h->counters().session_busy.load(), 1u);
  // Another session's query goes to the resolver (the control: the same
  // path forwards when the session is under its cap).
  EXPECT_EQ(rcode_of(*h, "q.allowed.test", quiet_), -1);
  EXPECT_EQ(deferred.names.size(), 4u);
  EXPECT_EQ(h->pending_of("flood"), 3u);
  EXPECT_EQ(h->pending_of("quiet"), 1u);
  // An answer frees a place of its session.
  deferred.callbacks.at(0)(ResolveResult{Rcode::NoError, {*zn::net::IpAddress::parse("198.18.0.10")}, 5});
  EXPECT_EQ(h->pending_of("flood"), 2u);
  EXPECT_EQ(rcode_of(*h, "n4.allowed.test", source_), -1);
  // A failure does too; nothing is kept for a session with nothing pending.
  for (size_t i = 1; i < deferred.callbacks.size(); ++i)
    deferred.callbacks[i](ResolveResult{Rcode::ServFail, {}, 0});
  EXPECT_EQ(h->pending_of("flood"), 0u);
  EXPECT_EQ(h->pending_of("quiet"), 0u);
}

TEST_F(SessionShareTest, ASessionOverItsRateIsRefusedBeforeThePolicyOthersAreAnswered) {
  HandlerConfig config;
  config.session_rate = {.per_second = 0.001, .burst = 5, .max_tracked = 100};
  auto h = make(config);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rcode_of(*h, "api.allowed.test", source_), LDNS_RCODE_NOERROR) << i;
  // Over the rate: refused, whether allowed or denied, and a denied name is
  // not even put to the policy (no audit record per flooded query).
  const size_t denials = policy_.denials().size();
  EXPECT_EQ(rcode_of(*h, "api.allowed.test", source_), LDNS_RCODE_REFUSED);
  EXPECT_EQ(rcode_of(*h, "secret.evil.test", source_), LDNS_RCODE_REFUSED);
  EXPECT_EQ(policy_.denials().size(), denials);
  EXPECT_EQ(h->counters().rate_limited.load(), 2u);
  // Control: the other session's bucket is its own.
  EXPECT_EQ(rcode_of(*h, "api.allowed.test", quiet_), LDNS_RCODE_NOERROR);
  EXPECT_EQ(rcode_of(*h, "secret.evil.test", quiet_), LDNS_RCODE_NXDOMAIN);
  EXPECT_EQ(policy_.denials().size(), denials + 1);
}

class ThrowingPolicy : public RecordingPolicy {
 public:
  bool throw_in_decide = false, throw_in_answer = false;
  DnsDecision decide(const DnsSession& s, const std::string& q) const override {
    if (throw_in_decide) throw std::runtime_error("policy bug");
    return RecordingPolicy::decide(s, q);
  }
  void on_answer(const DnsSession&, const std::string&, const std::vector<zn::net::IpAddress>&,
                 uint32_t) override {
    if (throw_in_answer) throw std::runtime_error("audit bug");
  }
};

TEST_F(HandlerTest, ThrowingPolicyIsServfail) {
  ThrowingPolicy throwing;
  QueryHandler h(throwing, resolver_, {}, [](std::function<void()> f) { f(); });
  throwing.throw_in_decide = true;
  EXPECT_EQ(parse_reply(*ask(h, make_query("api.allowed.test")))->rcode, LDNS_RCODE_SERVFAIL);
  throwing.throw_in_decide = false;
  throwing.throw_in_answer = true;
  EXPECT_EQ(parse_reply(*ask(h, make_query("api.allowed.test")))->rcode, LDNS_RCODE_SERVFAIL);
  EXPECT_EQ(h.counters().snapshot().internal_errors, 2u);
  EXPECT_EQ(h.pending(), 0u);
}

TEST_F(HandlerTest, MalformedPacketsAreCountedNeverCrash) {
  auto h = make();
  Bytes q = make_query("api.allowed.test");
  EXPECT_FALSE(ask(*h, Bytes(5, 0xff)));  // too short: dropped
  EXPECT_FALSE(ask(*h, edit_query("a.test", [](ldns_pkt* p) { ldns_pkt_set_qr(p, true); })));  // QR
  EXPECT_FALSE(ask(*h, Bytes(kMaxQuerySize + 100, 0)));                                        // oversize
  Bytes truncated(q.begin(), q.end() - 3);
  EXPECT_EQ(parse_reply(*ask(*h, truncated))->rcode, LDNS_RCODE_FORMERR);
  Bytes loop = compression_loop(q);
  EXPECT_EQ(parse_reply(*ask(*h, loop))->rcode, LDNS_RCODE_FORMERR);
  Bytes two = edit_query("a.allowed.test", [](ldns_pkt* p) {
    ldns_rr* extra = nullptr;
    ldns_rr_new_question_frm_str(&extra, "b.allowed.test. IN A", nullptr, nullptr);
    ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, extra);
  });
  EXPECT_EQ(parse_reply(*ask(*h, two))->rcode, LDNS_RCODE_FORMERR);
  // Random garbage of every length up to 600: no crash, nothing resolved.
  uint32_t x = 12345;
  for (size_t len = 0; len < 600; ++len) {
    Bytes g(len);
    for (auto& b : g) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
    (void)ask(*h, g);
  }
  auto c = h->counters().snapshot();
  EXPECT_EQ(c.malformed + c.unsupported + c.allowed + c.denied, c.queries);
  EXPECT_GE(c.malformed, 6u);
  EXPECT_EQ(resolver_.calls(), 0u);
  EXPECT_TRUE(policy_.answers().empty());
}

}  // namespace
}  // namespace zn::dns::test
