// The event model: names, validation, timestamp format, canonical payload and
// the JSON line.
#include <regex>
#include <string>
#include <vector>

#include "support/audit_fixtures.h"
#include "broker/audit/chain.h"
#include "broker/audit/event.h"

namespace zn::broker {
namespace {

using nlohmann::json;
using test::ev;

TEST(AuditEventNames, AcceptsExactlyTheDesignSet) {
  const char* good[] = {"egress:allow",        "egress:deny",    "egress:ask",         "egress:approved",
                        "egress:rate_limited", "dns:allow",      "dns:deny",           "packet:deny",
                        "resource:read",       "resource:write", "resource:deny",      "command:run",
                        "command:reject",      "session:create", "session:update",     "session:delete",
                        "secret:reflected",    "egress:denied",  "egress:ask_timeout", "grant:created",
                        "grant:expired",       "grant:revoked",  "dns:unanswered"};
  for (const char* n : good) {
    EXPECT_TRUE(is_audit_event_name(n)) << n;
    EXPECT_NO_THROW(validate_audit_event(ev(n, "user-1"))) << n;
  }
  const char* bad[] = {"",
                       "egress:",
                       "egress",
                       "EGRESS:allow",
                       "egress:allow ",
                       " egress:allow",
                       "egress:allowed",
                       "dns:ask",
                       "packet:allow",
                       "session:list",
                       "audit:verify",
                       "egress:allow\n"};
  for (const char* n : bad) {
    EXPECT_FALSE(is_audit_event_name(n)) << n;
    EXPECT_THROW(validate_audit_event(ev(n, "user-1")), std::invalid_argument) << n;
  }
  EXPECT_TRUE(is_audit_event_prefix("egress:"));
  EXPECT_TRUE(is_audit_event_prefix("session:"));
  EXPECT_TRUE(is_audit_event_prefix("secret:"));
  EXPECT_FALSE(is_audit_event_prefix("egress"));
  EXPECT_FALSE(is_audit_event_prefix("e"));
}

TEST(AuditEventValidation, Sid) {
  EXPECT_NO_THROW(validate_audit_event(ev("dns:deny", std::string(128, 'a'))));
  EXPECT_NO_THROW(validate_audit_event(ev("dns:deny", "")));
  EXPECT_NO_THROW(validate_audit_event(ev("dns:deny", "user-\xC3\xA9")));  // é
  EXPECT_THROW(validate_audit_event(ev("dns:deny", std::string(129, 'a'))), std::invalid_argument);
  for (std::string bad : {std::string("user\n1"), std::string("user\t1"), std::string("a\x7f"),
                          std::string("a\0b", 3), std::string("a\x1b[31m"),
                          std::string("a\xC2\x85"),  // U+0085 NEL (C1 control)
                          std::string("a\xFF"), std::string("a\xC3"), std::string("\xC0\xAF")})
    EXPECT_THROW(validate_audit_event(ev("dns:deny", bad)), std::invalid_argument) << bad;
}

TEST(AuditEventValidation, DetailMustBeAnObject) {
  EXPECT_NO_THROW(validate_audit_event(ev("dns:deny", "s", json::object())));
  EXPECT_NO_THROW(validate_audit_event(ev("dns:deny", "s", json{{"host", "x"}})));
  for (const json& bad :
       {json(), json::array(), json("text"), json(42), json(true), json::array({json{{"a", 1}}})})
    EXPECT_THROW(validate_audit_event(ev("dns:deny", "s", bad)), std::invalid_argument) << bad.dump();
}

TEST(AuditEventValidation, DetailMustSerialise) {
  EXPECT_THROW(validate_audit_event(ev("dns:deny", "s", json{{"host", "bad\xFF"}})), std::invalid_argument);
  EXPECT_THROW(validate_audit_event(ev("dns:deny", "s", json{{"bad\xFF", 1}})), std::invalid_argument);
  json deep = json::object();
  for (int i = 0; i < 100; ++i) deep = json{{"d", deep}};
  EXPECT_THROW(validate_audit_event(ev("dns:deny", "s", deep)), std::invalid_argument);
  EXPECT_THROW(validate_audit_event(ev("dns:deny", "s", json{{"big", std::string(70000, 'x')}})),
               std::invalid_argument);
}

TEST(AuditTimestamp, Rfc3339UtcMillis) {
  using namespace std::chrono;
  const auto t = sys_days{year{2026} / November / 29} + hours{12} + milliseconds{123};
  EXPECT_EQ(format_audit_ts(t), "2026-11-29T12:00:00.123Z");
  EXPECT_EQ(format_audit_ts(t + microseconds{999}), "2026-11-29T12:00:00.123Z");  // truncated
  EXPECT_EQ(format_audit_ts(sys_days{year{1970} / January / 1}), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(format_audit_ts(sys_days{year{2024} / February / 29} + hours{23} + minutes{59} + seconds{59} +
                            milliseconds{7}),
            "2024-02-29T23:59:59.007Z");
}

TEST(AuditCanonical, NlohmannSortsKeysAtEveryLevel) {
  json a = json::object();
  a["zeta"] = 1;
  a["alpha"] = json::object();
  a["alpha"]["y"] = 2;
  a["alpha"]["b"] = 3;
  json b = json::object();
  b["alpha"] = json::object();
  b["alpha"]["b"] = 3;
  b["alpha"]["y"] = 2;
  b["zeta"] = 1;
  EXPECT_EQ(a.dump(), b.dump());
  EXPECT_EQ(a.dump(), R"({"alpha":{"b":3,"y":2},"zeta":1})");
  // Parsing and dumping again is the identity on a canonical dump (verify relies on it).
  json c =
      json{{"f", 0.1}, {"n", -5}, {"u", 18446744073709551615ull}, {"s", "\"q\"\n\xC3\xA9"}, {"z", nullptr}};
  EXPECT_EQ(json::parse(c.dump()).dump(), c.dump());
}

TEST(AuditCanonical, PayloadShape) {
  AuditRecord r;
  r.seq = 7;
  r.ts = "2026-11-29T12:00:00.123Z";
  r.event = "egress:deny";
  r.sid = "user-1";
  r.detail = json{{"reason", "default deny"}, {"host", "api.stripe.com"}};
  r.prev = std::string(64, '0');
  r.hash = "ignored";
  EXPECT_EQ(r.canonical_payload(),
            R"({"detail":{"host":"api.stripe.com","reason":"default deny"},"event":"egress:deny",)"
            R"("seq":7,"sid":"user-1","ts":"2026-11-29T12:00:00.123Z"})");
}

// The payload is written by hand from the serialised detail: byte for byte
// what dumping the whole object writes (the chain's definition), for
// escapes, UTF-8, nesting and numbers, from detail or from detail_json.
TEST(AuditCanonical, PayloadIsTheWholeObjectDumped) {
  for (const json& detail :
       {json::object(), json{{"s", "\"q\"\n\xC3\xA9\x01"}, {"n", -5}, {"f", 0.5}, {"z", nullptr}},
        json{
            {"a", json::array({1, "x", json{{"k", true}}})}, {"Z", json::object()}, {"\xE2\x82\xAC", "e"}}}) {
    AuditRecord r;
    r.seq = 18446744073709551615ull;
    r.ts = "2026-11-29T12:00:00.123Z";
    r.event = "egress:allow";
    r.sid = "s\"\\1";
    r.detail = detail;
    const json whole = {{"seq", r.seq}, {"ts", r.ts}, {"event", r.event}, {"sid", r.sid}, {"detail", detail}};
    EXPECT_EQ(r.canonical_payload(), whole.dump());
    r.detail_json = detail.dump();
    r.detail = json();  // only the serialised form, as the writer keeps it
    EXPECT_EQ(r.canonical_payload(), whole.dump());
    EXPECT_NE(r.json_line().find(R"("detail":)" + detail.dump() + R"(,"prev")"), std::string::npos);
  }
}

// The head's strings are escaped without dump() when ASCII: every byte
// 0x00-0x7f, alone and in a run, and a non-ASCII sid (dump()'s path), each
// byte for byte what dumping the whole object writes.
TEST(AuditCanonical, HeadStringsAreEscapedAsDumpEscapesThem) {
  std::vector<std::string> sids;
  std::string every;
  for (int c = 0; c < 0x80; ++c) {
    sids.push_back(std::string(1, static_cast<char>(c)));
    every += static_cast<char>(c);
  }
  sids.push_back(every);
  sids.push_back("caf\xC3\xA9\n\"");
  for (const std::string& sid : sids) {
    AuditRecord r;
    r.seq = 1;
    r.ts = "2026-11-29T12:00:00.123Z";
    r.event = "egress:allow";
    r.sid = sid;
    r.detail = json::object();
    const json whole = {
        {"seq", r.seq}, {"ts", r.ts}, {"event", r.event}, {"sid", r.sid}, {"detail", r.detail}};
    EXPECT_EQ(r.canonical_payload(), whole.dump()) << "sid byte " << static_cast<int>(sid[0]);
    EXPECT_NE(r.json_line().find(R"("sid":)" + json(sid).dump() + ","), std::string::npos);
  }
}

TEST(AuditCanonical, JsonLineKeyOrder) {
  AuditRecord r;
  r.seq = 3;
  r.ts = "2026-11-29T12:00:00.123Z";
  r.event = "dns:deny";
  r.sid = "user-\"1\"";
  r.detail = json{{"name", "x.example"}};
  r.prev = std::string(64, 'a');
  r.hash = std::string(64, 'b');
  EXPECT_EQ(r.json_line(), R"({"zn":"audit","seq":3,"ts":"2026-11-29T12:00:00.123Z","event":"dns:deny",)"
                           R"("sid":"user-\"1\"","detail":{"name":"x.example"},"prev":")" +
                               std::string(64, 'a') + R"(","hash":")" + std::string(64, 'b') + R"("})");
}

TEST(AuditChainHash, Sha256KnownVectorsAndDefinition) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(audit_genesis_hash(), std::string(64, '0'));
  AuditRecord r;
  r.seq = 1;
  r.ts = "2026-11-29T12:00:00.123Z";
  r.event = "session:create";
  r.sid = "user-1";
  r.detail = json::object();
  EXPECT_EQ(audit_chain_hash(audit_genesis_hash(), r),
            sha256_hex(std::string(64, '0') + r.canonical_payload()));
}

}  // namespace
}  // namespace zn::broker
