// The wire layer alone: what parse_query accepts and rejects, what replies carry.
#include <gtest/gtest.h>

#include "support/dns_messages.h"
#include "userspace/dns/message.h"

namespace zn::dns::test {
namespace {

Problem problem_of(const Bytes& wire) {
  auto r = parse_query(wire);
  EXPECT_TRUE(std::holds_alternative<Rejection>(r));
  return std::holds_alternative<Rejection>(r) ? std::get<Rejection>(r).problem : Problem::TooShort;
}

TEST(DnsMessage, ParsesOneQuestionLowercasedWithoutTrailingDot) {
  auto r = parse_query(make_query("API.Allowed.TEST.", {.type = LDNS_RR_TYPE_AAAA, .id = 77}));
  ASSERT_TRUE(std::holds_alternative<Query>(r));
  const Query& q = std::get<Query>(r);
  EXPECT_EQ(q.qname, "api.allowed.test");
  EXPECT_EQ(q.qtype, LDNS_RR_TYPE_AAAA);
  EXPECT_EQ(q.id, 77);
  EXPECT_FALSE(q.edns);
  EXPECT_EQ(udp_reply_limit(q), 512u);
}

TEST(DnsMessage, EscapedDotsStayInsideTheirLabel) {
  // One label "a.b": must not read as two labels under "b.allowed.test".
  auto r = parse_query(make_query("a\\.b.evil.test"));
  ASSERT_TRUE(std::holds_alternative<Query>(r));
  EXPECT_EQ(std::get<Query>(r).qname, "a\\.b.evil.test");
}

TEST(DnsMessage, RejectsShortOversizeAndResponses) {
  EXPECT_EQ(problem_of({}), Problem::TooShort);
  EXPECT_EQ(problem_of(Bytes(11, 0)), Problem::TooShort);
  EXPECT_EQ(problem_of(Bytes(kMaxQuerySize + 1, 0)), Problem::Oversize);
  Bytes response = edit_query("x.test", [](ldns_pkt* p) { ldns_pkt_set_qr(p, true); });
  EXPECT_EQ(problem_of(response), Problem::IsResponse);
  EXPECT_TRUE(std::get<Rejection>(parse_query(response)).reply.empty());  // dropped
}

TEST(DnsMessage, TruncatedGarbageAndCompressionLoopsAreFormErr) {
  Bytes q = make_query("api.allowed.test", {.id = 0xbeef});
  for (size_t cut = 12; cut < q.size(); ++cut) {
    Bytes part(q.begin(), q.begin() + static_cast<long>(cut));
    auto r = parse_query(part);
    ASSERT_TRUE(std::holds_alternative<Rejection>(r)) << cut;
    EXPECT_TRUE(is_malformed(std::get<Rejection>(r).problem));
  }
  Bytes loop = compression_loop(q);
  auto r = parse_query(loop);
  ASSERT_TRUE(std::holds_alternative<Rejection>(r));
  EXPECT_EQ(std::get<Rejection>(r).problem, Problem::Unparseable);
  auto reply = parse_reply(std::get<Rejection>(r).reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->rcode, LDNS_RCODE_FORMERR);
  EXPECT_EQ(reply->id, 0xbeef);
  EXPECT_EQ(reply->qdcount, 0u);  // the hostile question is not echoed

  Bytes garbage(200);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  garbage[2] &= 0x7f;  // QR clear
  EXPECT_TRUE(std::holds_alternative<Rejection>(parse_query(garbage)));
}

TEST(DnsMessage, ZeroOrTwoQuestionsAreFormErr) {
  Bytes two = edit_query("a.allowed.test", [](ldns_pkt* p) {
    ldns_rr* q = nullptr;
    ASSERT_EQ(ldns_rr_new_question_frm_str(&q, "b.allowed.test. IN A", nullptr, nullptr), LDNS_STATUS_OK);
    ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, q);
  });
  EXPECT_EQ(problem_of(two), Problem::QuestionCount);
  Bytes zero = edit_query("a.allowed.test", [](ldns_pkt* p) {
    ldns_rr_list_deep_free(ldns_pkt_question(p));
    ldns_pkt_set_question(p, ldns_rr_list_new());
    ldns_pkt_set_qdcount(p, 0);
  });
  EXPECT_EQ(problem_of(zero), Problem::QuestionCount);
  auto reply = parse_reply(std::get<Rejection>(parse_query(zero)).reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->rcode, LDNS_RCODE_FORMERR);
}

TEST(DnsMessage, OtherOpcodesAndClassesAreNotImp) {
  Bytes notify =
      edit_query("a.allowed.test", [](ldns_pkt* p) { ldns_pkt_set_opcode(p, LDNS_PACKET_NOTIFY); });
  EXPECT_EQ(problem_of(notify), Problem::Opcode);
  EXPECT_FALSE(is_malformed(Problem::Opcode));
  Bytes chaos = make_query("version.bind", {.type = LDNS_RR_TYPE_TXT, .klass = LDNS_RR_CLASS_CH});
  EXPECT_EQ(problem_of(chaos), Problem::Class);
  auto reply = parse_reply(std::get<Rejection>(parse_query(chaos)).reply);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->rcode, LDNS_RCODE_NOTIMPL);
}

TEST(DnsMessage, ReplyEchoesQuestionAndCarriesAddresses) {
  auto q = std::get<Query>(parse_query(make_query("Api.Allowed.Test", {.id = 9, .edns = true})));
  EXPECT_TRUE(q.edns);
  const auto a = *zn::net::IpAddress::parse("198.18.0.10");
  const auto v6 = *zn::net::IpAddress::parse("2001:db8::1");
  auto reply = parse_reply(build_reply(q, Rcode::NoError, {a, v6}, 42, 512));
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->qr);
  EXPECT_TRUE(reply->rd);
  EXPECT_TRUE(reply->ra);
  EXPECT_EQ(reply->id, 9);
  EXPECT_EQ(reply->qname, "Api.Allowed.Test.");                          // case as asked
  EXPECT_EQ(reply->addresses, std::vector<std::string>{"198.18.0.10"});  // only A for an A query
  EXPECT_EQ(reply->ttls, std::vector<uint32_t>{42});
  EXPECT_TRUE(reply->edns);
}

TEST(DnsMessage, TooLargeForUdpIsTruncated) {
  auto q = std::get<Query>(parse_query(make_query("many.allowed.test")));
  std::vector<zn::net::IpAddress> many;
  for (uint8_t i = 0; i < 100; ++i) many.push_back(zn::net::IpAddress::v4({198, 18, 1, i}));
  auto reply = parse_reply(build_reply(q, Rcode::NoError, many, 60, udp_reply_limit(q)));
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->tc);
  EXPECT_TRUE(reply->addresses.empty());
  auto full = parse_reply(build_reply(q, Rcode::NoError, many, 60, 65535));
  EXPECT_EQ(full->addresses.size(), 100u);
  EXPECT_FALSE(full->tc);
}

}  // namespace
}  // namespace zn::dns::test
