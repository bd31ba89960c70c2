// Standing approvals: what a grant covers and what it does not, that every
// one ends (expiry on an injected clock, revoke, a deleted session), and
// that each end is reported once.
#include "broker/session/grant_book.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "broker/session/approval_book.h"

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

const GrantScope kScope{"s1", "https", "DELETE", "api.github.com", "/repos/a", false};

struct Reported {
  std::vector<std::pair<uint64_t, GrantEvent>> events;
  GrantBook::Notify hook() {
    return [this](const Grant& g, GrantEvent e) { events.emplace_back(g.id, e); };
  }
};

TEST(GrantBook, CoversOnlyItsSessionSchemeMethodHostAndPath) {
  GrantBook book;
  const auto t0 = GrantBook::Clock::now();
  const Grant g = book.create(kScope, 60s, 1000, 7, t0);
  EXPECT_NE(g.id, 0u);
  EXPECT_EQ(g.uid, 1000u);
  EXPECT_EQ(g.ticket, 7u);
  EXPECT_EQ(g.expires - g.created, 60s);
  auto covered = book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a", t0);
  ASSERT_TRUE(covered);
  EXPECT_EQ(covered->id, g.id);
  EXPECT_FALSE(book.covers("s2", "https", "DELETE", "api.github.com", "/repos/a", t0));
  EXPECT_FALSE(book.covers("s1", "http", "DELETE", "api.github.com", "/repos/a", t0));
  EXPECT_FALSE(book.covers("s1", "https", "POST", "api.github.com", "/repos/a", t0));
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.stripe.com", "/repos/a", t0));
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a/b", t0));
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos", t0));
}

TEST(GrantBook, APatternWidensThePath) {
  GrantBook book;
  const auto t0 = GrantBook::Clock::now();
  GrantScope scope = kScope;
  scope.path = "/repos/*/issues/**";
  scope.pattern = true;
  book.create(scope, 60s, 0, 0, t0);
  EXPECT_TRUE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a/issues/1", t0));
  EXPECT_TRUE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/b/issues", t0));
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a/pulls/1", t0));
  scope.path = "/repos/../x";
  EXPECT_THROW(book.create(scope, 60s, 0, 0, t0), std::invalid_argument);
}

TEST(GrantBook, ADurationIsAtLeastASecondAndAtMostTheMaximum) {
  GrantBook book(2h);
  EXPECT_THROW(book.create(kScope, 0s, 0), std::invalid_argument);
  EXPECT_THROW(book.create(kScope, -5s, 0), std::invalid_argument);
  EXPECT_THROW(book.create(kScope, 2h + 1s, 0), std::invalid_argument);
  EXPECT_NO_THROW(book.create(kScope, 2h, 0));
  EXPECT_NO_THROW(book.create(kScope, 1s, 0));
  EXPECT_EQ(book.live().size(), 2u);
}

TEST(GrantBook, AGrantExpiresAndIsReportedOnce) {
  Reported r;
  GrantBook book(24h, r.hook());
  const auto t0 = GrantBook::Clock::now();
  const Grant g = book.create(kScope, 10s, 0, 0, t0);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].second, GrantEvent::kCreated);
  EXPECT_TRUE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a", t0 + 9s));
  EXPECT_EQ(book.sweep(t0 + 9s), 0u);
  // Looked at after its time: gone, reported as expired, once.
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a", t0 + 10s));
  EXPECT_EQ(book.sweep(t0 + 11s), 0u);
  EXPECT_TRUE(book.live(t0 + 11s).empty());
  ASSERT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.events[1], std::make_pair(g.id, GrantEvent::kExpired));
  // Nobody looks: the sweep finds it.
  const Grant h = book.create(kScope, 5s, 0, 0, t0);
  EXPECT_EQ(book.sweep(t0 + 4s), 0u);
  EXPECT_EQ(book.sweep(t0 + 5s), 1u);
  ASSERT_EQ(r.events.size(), 4u);
  EXPECT_EQ(r.events[3], std::make_pair(h.id, GrantEvent::kExpired));
}

TEST(GrantBook, RevokeEndsAGrantAtOnce) {
  Reported r;
  GrantBook book(24h, r.hook());
  const auto t0 = GrantBook::Clock::now();
  const Grant g = book.create(kScope, 60s, 0, 0, t0);
  const Grant other = book.create(kScope, 60s, 0, 0, t0);
  ASSERT_TRUE(book.revoke(g.id, t0 + 1s));
  EXPECT_EQ(r.events.back(), std::make_pair(g.id, GrantEvent::kRevoked));
  EXPECT_FALSE(book.revoke(g.id, t0 + 1s));  // once
  EXPECT_FALSE(book.revoke(424242, t0 + 1s));
  // The other grant still covers; revoked too, nothing does.
  EXPECT_EQ(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a", t0 + 1s)->id, other.id);
  ASSERT_TRUE(book.revoke(other.id, t0 + 1s));
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a", t0 + 1s));
  EXPECT_TRUE(book.live(t0 + 1s).empty());
  // Revoked after its time, before any sweep: reported as expired, not revoked.
  const Grant late = book.create(kScope, 5s, 0, 0, t0);
  EXPECT_FALSE(book.revoke(late.id, t0 + 6s));
  EXPECT_EQ(r.events.back(), std::make_pair(late.id, GrantEvent::kExpired));
  EXPECT_EQ(book.sweep(t0 + 7s), 0u);
}

TEST(GrantBook, ADeletedSessionsGrantsGoWithIt) {
  Reported r;
  ApprovalBook::Options o;
  o.on_grant = r.hook();
  ApprovalBook approvals(o);
  GrantBook& book = approvals.grants();
  GrantScope other = kScope;
  other.session = "s2";
  const Grant gone = book.create(kScope, 60s, 0);
  book.create(other, 60s, 0);
  approvals.forget_session("s1");
  EXPECT_FALSE(book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a"));
  EXPECT_TRUE(book.covers("s2", "https", "DELETE", "api.github.com", "/repos/a"));
  EXPECT_EQ(r.events.back(), std::make_pair(gone.id, GrantEvent::kSessionDeleted));
}

TEST(GrantBook, DurationsAreSecondsMinutesOrHours) {
  EXPECT_EQ(parse_grant_duration("30s"), 30s);
  EXPECT_EQ(parse_grant_duration("10m"), 600s);
  EXPECT_EQ(parse_grant_duration("2h"), 7200s);
  EXPECT_EQ(parse_grant_duration("0s"), 0s);  // parsed; refused by create()
  for (const char* bad : {"", "s", "10", "10d", "-1m", "1.5h", "1h30m", " 1m", "99999999999999h"})
    EXPECT_FALSE(parse_grant_duration(bad)) << bad;
}

// The proxy's loops look grants up while the control plane creates and
// revokes them and the periodic thread sweeps (run under TSan by
// scripts/sanitize.sh). Every lookup answers consistently: a grant covering
// the request or none; the one grant never revoked covers throughout.
TEST(GrantBookConcurrency, LookupsWhileGrantsComeAndGo) {
  std::atomic<int> reported{0};
  GrantBook book(24h, [&](const Grant&, GrantEvent) { ++reported; });
  const Grant kept = book.create(kScope, 1h, 0);
  GrantScope other = kScope;
  other.path = "/repos/b";
  std::atomic<bool> stop{false};
  std::atomic<int> misses{0};
  std::vector<std::thread> loops;
  for (int t = 0; t < 3; ++t)
    loops.emplace_back([&] {
      while (!stop) {
        if (!book.covers("s1", "https", "DELETE", "api.github.com", "/repos/a")) ++misses;
        (void)book.covers("s1", "https", "DELETE", "api.github.com", "/repos/b");
      }
    });
  for (int i = 0; i < 300; ++i) {
    const Grant g = book.create(other, 1s, 0);
    if (i % 2) book.revoke(g.id);
    book.sweep(GrantBook::Clock::now() + 2s);  // ends every short one
    (void)book.live();
  }
  stop = true;
  for (auto& t : loops) t.join();
  EXPECT_EQ(misses, 0);
  ASSERT_EQ(book.live().size(), 1u);
  EXPECT_EQ(book.live()[0].id, kept.id);
  EXPECT_EQ(reported, 1 + 300 * 2);  // created once; each short one created and ended once
}

}  // namespace
}  // namespace zn::broker
