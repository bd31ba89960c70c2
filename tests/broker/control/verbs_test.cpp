// The JSON of zerod's control verbs, byte for byte: znctl and operators'
// scripts read these answers. The expected text is what zerod answered
// before the verbs moved out of the daemon (issue 10).
#include "broker/control/verbs.h"

#include <gtest/gtest.h>

#include "broker/control/counter_values.h"
#include "broker/policy/parser.h"

namespace zn::broker::test {
namespace {

TEST(Verbs, StatusShowsTheQueryTotalAndEveryOutcome) {
  EXPECT_EQ(
      status_json(2, "/sys/fs/bpf/zeroness", "zn-host", dns_values()).dump(),
      R"({"dns":{"allowed":102,"denied":103,"malformed":105,"queries":101,"rate_limited":111,"refused":104,)"
      R"("session_busy":112,"upstream_failures":107},"netns":"zn-host","pin_root":"/sys/fs/bpf/zeroness","sessions":2})");
}

TEST(Verbs, StatsNamesEveryNonZeroCounter) {
  dp::SessionCounters c{};
  c[ZN_PASS_DNS] = 13;
  c[ZN_DROP_TCP_PORT] = 1;
  c[ZN_STAT_EVENTS_SUPPRESSED] = 7;
  EXPECT_EQ(verdicts_json(c).dump(), R"({"drop:tcp_port":1,"events:suppressed":7,"pass:dns":13})");
  EXPECT_EQ(verdicts_json(dp::SessionCounters{}).dump(), "{}");
}

Session session(const std::string& policy_json) {
  Session s;
  s.record.id = "user-1";
  s.record.session_idx = 1;
  s.record.device = "zn-tap0";
  s.record.adopted = true;
  s.record.policy_version = 2;
  s.ifindex = 3;
  s.net = vmm::guest_network(vmm::AddressPlan::lab_default(), 0);
  s.policy = CompiledPolicy::compile(parse_policy(policy_json));
  return s;
}

constexpr const char* kPolicy = R"({"policy":{"allow":[
    {"host":"api.github.com","methods":["GET"],"paths":["/repos/**"]},
    {"host":"api.stripe.com","identity":"cap:stripe"},
    {"host":"*.npmjs.org"},
    {"host":"api.github.com","methods":["DELETE"],"paths":["/repos/**"],"action":"ask"},
    {"host":"db.internal","port":5432,"proto":"tcp"}],
  "deny":[{"host":"evil.example"}]},
 "resources":{"stripe":{"accessToken":"sk_live_never_shown_4f9a8b"}}})";

constexpr const char* kNetwork =
    R"("network":{"address":"198.19.0.2/24","address6":"2001:db8:19::2/64",)"
    R"("ca_certificate":"/state/ca/ca.pem","dns":"198.19.0.1","gateway":"198.19.0.1",)"
    R"("gateway6":"2001:db8:19::1","mac":"02:7a:6e:00:00:01","mtu":1500})";

TEST(Verbs, SessionListShowsTheNetwork) {
  EXPECT_EQ(session_json(session(kPolicy), "/state/ca/ca.pem", false).dump(),
            std::string(R"({"adopted":true,"device":"zn-tap0","id":"user-1","ifindex":3,)") + kNetwork +
                R"(,"policy_version":2,"session_idx":1})");
}

TEST(Verbs, SessionShowAddsThePolicyButNeverItsSecrets) {
  const std::string shown = session_json(session(kPolicy), "/state/ca/ca.pem", true).dump();
  EXPECT_EQ(
      shown,
      std::string(
          R"({"adopted":true,"device":"zn-tap0","exposed":{},"guest_env":{},"id":"user-1","ifindex":3,)") +
          kNetwork +
          R"(,"policy":{"allow":[{"host":"api.github.com","methods":["GET"],"paths":["/repos/**"]},)"
          R"({"host":"api.stripe.com","identity":"cap:stripe","inject":{"header":"Authorization","prefix":"Bearer "}},)"
          R"({"host":"*.npmjs.org"},)"
          R"({"action":"ask","host":"api.github.com","methods":["DELETE"],"paths":["/repos/**"]},)"
          R"({"host":"db.internal","port":5432}],"canaries":0,"caps":{},"default":"deny","deny":[{"host":"evil.example"}],)"
          R"("resources":["stripe"]},"policy_version":2,"session_idx":1})");
  EXPECT_EQ(shown.find("sk_live"), std::string::npos);
}

TEST(Verbs, SessionShowIncludesTheRate) {
  const Session s =
      session(R"({"policy":{"allow":[{"host":"a.example"}],"rate":{"burst":5,"per_second":2}}})");
  const std::string shown = session_json(s, "/ca.pem", true).dump();
  EXPECT_NE(shown.find(R"("rate":{"burst":5,"per_second":2})"), std::string::npos) << shown;
}

// What approval.list, approval.watch and the webhook show of a held request,
// and approval.grants of a grant.
TEST(Verbs, AHeldRequestAndAGrantAsShown) {
  const auto t0 =
      std::chrono::system_clock::time_point(std::chrono::seconds(1764553200));  // 2025-12-01T01:40Z
  HeldRequest h;
  h.ticket = 42;
  h.session = "user-1";
  h.scheme = "https";
  h.host = "api.github.com";
  h.method = "DELETE";
  h.path = "/repos/a";
  h.header_names = {"host", "content-type"};
  h.body_preview = "token=<redacted>";
  h.held_at = t0;
  h.expires_at = t0 + std::chrono::seconds(120);
  EXPECT_EQ(
      held_request_json(h, t0 + std::chrono::seconds(7)).dump(),
      R"({"body_preview":"token=<redacted>","expires":"2025-12-01T01:42:00.000Z",)"
      R"("header_names":["host","content-type"],"held_at":"2025-12-01T01:40:00.000Z","held_s":7,)"
      R"("host":"api.github.com","method":"DELETE","path":"/repos/a","scheme":"https","session":"user-1",)"
      R"("ticket":42,"url":"https://api.github.com/repos/a"})");
  const nlohmann::json approved = ticket_notice(h, TicketEvent::kApproved, 1000u);
  EXPECT_EQ(approved["event"], "approved");
  EXPECT_EQ(approved["uid"], 1000);
  EXPECT_FALSE(ticket_notice(h, TicketEvent::kHeld, std::nullopt).contains("uid"));
  Grant g;
  g.id = 7;
  g.scope = {"user-1", "https", "DELETE", "api.github.com", "/repos/**", true};
  g.ticket = 42;
  g.uid = 0;
  g.created = t0;
  g.expires = t0 + std::chrono::seconds(600);
  EXPECT_EQ(
      grant_json(g).dump(),
      R"({"created":"2025-12-01T01:40:00.000Z","expires":"2025-12-01T01:50:00.000Z","host":"api.github.com",)"
      R"("id":7,"method":"DELETE","path":"/repos/**","path_pattern":true,"scheme":"https","session":"user-1",)"
      R"("ticket":42,"uid":0})");
  EXPECT_EQ(grant_notice(g, GrantEvent::kExpired)["event"], "grant_expired");
}

}  // namespace
}  // namespace zn::broker::test
