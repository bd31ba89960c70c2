#include "broker/session/approval_book.h"

#include <gtest/gtest.h>

#include <set>
#include <tuple>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

TEST(ApprovalBook, AnApprovalIsForItsTicketOnlyAndReadOnce) {
  ApprovalBook book(10s);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t a = book.hold("s", "https", "api.internal", "DELETE", "/x", t0);
  const uint64_t b = book.hold("s", "https", "api.internal", "DELETE", "/y", t0);
  EXPECT_NE(a, b);
  EXPECT_EQ(book.pending(t0).size(), 2u);
  auto decided = book.decide(a, true, t0);
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->path, "/x");
  EXPECT_EQ(book.take(b, t0), ApprovalState::kPending);
  EXPECT_EQ(book.take(a, t0), ApprovalState::kApproved);
  EXPECT_EQ(book.take(a, t0), ApprovalState::kUnknown);  // consumed
  EXPECT_EQ(book.pending(t0).size(), 1u);
}

TEST(ApprovalBook, ADecisionCannotBeReplayedOrChanged) {
  ApprovalBook book(10s);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t a = book.hold("s", "https", "h", "POST", "/", t0);
  EXPECT_TRUE(book.decide(a, false, t0));
  EXPECT_FALSE(book.decide(a, true, t0));
  EXPECT_FALSE(book.decide(a, false, t0));
  EXPECT_EQ(book.take(a, t0), ApprovalState::kDenied);
  EXPECT_FALSE(book.decide(a, true, t0));
  EXPECT_FALSE(book.decide(424242, true, t0));
}

TEST(ApprovalBook, UndecidedTicketsExpireAndCannotBeApprovedLate) {
  ApprovalBook book(2s);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t a = book.hold("s", "https", "h", "POST", "/", t0);
  EXPECT_TRUE(book.pending(t0 + 1s).size() == 1u);
  EXPECT_TRUE(book.pending(t0 + 2s).empty());
  EXPECT_FALSE(book.decide(a, true, t0 + 3s));
  EXPECT_EQ(book.take(a, t0 + 3s), ApprovalState::kExpired);
}

TEST(ApprovalBook, ADeletedSessionsHeldRequestsAreDenied) {
  ApprovalBook book(10s);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t a = book.hold("gone", "https", "h", "POST", "/", t0);
  const uint64_t b = book.hold("kept", "https", "h", "POST", "/", t0);
  book.forget_session("gone");
  EXPECT_EQ(book.take(a, t0), ApprovalState::kDenied);
  EXPECT_EQ(book.take(b, t0), ApprovalState::kPending);
}

TEST(ApprovalBook, TicketsAreNotSequential) {
  ApprovalBook book(10s, 200);
  std::set<uint64_t> seen;
  uint64_t prev = 0;
  int consecutive = 0;
  for (int i = 0; i < 200; ++i) {
    const uint64_t t = book.hold("s", "https", "h", "GET", "/");
    EXPECT_NE(t, 0u);
    EXPECT_LE(t, (1ULL << 53));
    if (t == prev + 1) ++consecutive;
    prev = t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 200u);
  EXPECT_LT(consecutive, 3);
}

// Issue 32: one session holds at most its share of the book (each held
// request a guest connection or stream, and the operators' list and the
// webhook shared by every session); the others still hold theirs, and a
// ticket taken or cancelled gives its place back.
TEST(ApprovalBook, ASessionHoldsAtMostItsShareOfTheBook) {
  std::vector<std::string> reported;
  ApprovalBook::Options o;
  o.ttl = 10s;
  o.max_held_per_session = 3;
  o.on_ticket = [&](const HeldRequest& h, TicketEvent, std::optional<uint32_t>) {
    reported.push_back(h.session);
  };
  ApprovalBook book(o);
  const auto t0 = ApprovalBook::Clock::now();
  std::vector<uint64_t> held;
  for (int i = 0; i < 3; ++i) held.push_back(book.hold("greedy", "https", "h", "POST", "/", t0));
  for (uint64_t t : held) EXPECT_NE(t, 0u);
  EXPECT_EQ(book.hold("greedy", "https", "h", "POST", "/", t0), 0u);  // refused, nothing kept
  EXPECT_EQ(book.pending(t0).size(), 3u);
  EXPECT_EQ(reported.size(), 3u);  // and nothing reported to the operators
  // Another session is not refused (the control).
  EXPECT_NE(book.hold("quiet", "https", "h", "POST", "/", t0), 0u);
  // A decided ticket still counts until taken; taken, its place is back.
  ASSERT_TRUE(book.decide(held[0], true, t0));
  EXPECT_EQ(book.hold("greedy", "https", "h", "POST", "/", t0), 0u);
  EXPECT_EQ(book.take(held[0], t0), ApprovalState::kApproved);
  EXPECT_NE(book.hold("greedy", "https", "h", "POST", "/", t0), 0u);
  // So does a cancel (the guest went away).
  EXPECT_EQ(book.cancel(held[1], t0), ApprovalState::kCancelled);
  EXPECT_NE(book.hold("greedy", "https", "h", "POST", "/", t0), 0u);
}

// The proxy sleeps on a held request: it is woken exactly once by a decision
// (the operator's, a deleted session's), at once when there is nothing left
// to wait for, and never by a decision about another ticket.
TEST(ApprovalBook, AWatcherIsWokenOnceByItsTicketsDecision) {
  ApprovalBook book(10s);
  const uint64_t a = book.hold("s1", "https", "h", "GET", "/a");
  const uint64_t b = book.hold("s1", "https", "h", "GET", "/b");
  const uint64_t c = book.hold("s2", "https", "h", "GET", "/c");
  int woken_a = 0, woken_b = 0, woken_c = 0;
  book.watch(a, [&] { ++woken_a; });
  book.watch(b, [&] { ++woken_b; });
  book.watch(c, [&] { ++woken_c; });
  EXPECT_EQ(woken_a + woken_b + woken_c, 0);
  ASSERT_TRUE(book.decide(a, true));
  EXPECT_EQ(woken_a, 1);
  EXPECT_EQ(woken_b, 0);
  EXPECT_FALSE(book.decide(a, false));  // a replay wakes no one again
  EXPECT_EQ(woken_a, 1);
  book.forget_session("s1");
  EXPECT_EQ(woken_b, 1);
  EXPECT_EQ(woken_c, 0);
  EXPECT_EQ(book.take(b), ApprovalState::kDenied);
  // Decided already, or unknown: woken at once, in the caller's thread.
  int late = 0;
  book.watch(a, [&] { ++late; });
  book.watch(12345, [&] { ++late; });
  EXPECT_EQ(late, 2);
  EXPECT_EQ(book.take(a), ApprovalState::kApproved);
}

TEST(ApprovalBook, ExpiryIsTheWaitersOwnTimer) {
  ApprovalBook book(2s);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t t = book.hold("s", "https", "h", "GET", "/", t0);
  ASSERT_TRUE(book.expires_at(t));
  EXPECT_EQ(*book.expires_at(t), t0 + 2s);
  int woken = 0;
  book.watch(t, [&] { ++woken; });
  EXPECT_EQ(book.take(t, t0 + 3s), ApprovalState::kExpired);
  EXPECT_EQ(woken, 0);
  EXPECT_FALSE(book.expires_at(t));
}

// Each change of a ticket is reported once, with what the operator is shown
// and who decided: what `znctl approval watch` and the webhook carry.
TEST(ApprovalBook, EveryChangeOfATicketIsReportedOnce) {
  std::vector<std::tuple<uint64_t, TicketEvent, std::optional<uint32_t>>> seen;
  ApprovalBook::Options o;
  o.ttl = 2s;
  o.on_ticket = [&](const HeldRequest& h, TicketEvent e, std::optional<uint32_t> uid) {
    seen.emplace_back(h.ticket, e, uid);
  };
  ApprovalBook book(o);
  const auto t0 = ApprovalBook::Clock::now();
  HeldRequest r;
  r.session = "s";
  r.scheme = "https";
  r.host = "h";
  r.method = "POST";
  r.path = "/p";
  r.header_names = {"host", "content-type"};
  r.body_preview = "a=1";
  const uint64_t a = book.hold(r, t0);
  const uint64_t b = book.hold(r, t0);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_tuple(a, TicketEvent::kHeld, std::optional<uint32_t>()));
  const auto pending = book.pending(t0);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].header_names, r.header_names);
  EXPECT_EQ(pending[0].body_preview, "a=1");
  ASSERT_TRUE(book.decide(a, true, t0, 1000u));
  EXPECT_FALSE(book.decide(a, false, t0, 1000u));  // a replay reports nothing
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2], std::make_tuple(a, TicketEvent::kApproved, std::optional<uint32_t>(1000u)));
  EXPECT_EQ(book.take(a, t0), ApprovalState::kApproved);
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_EQ(book.take(b, t0 + 3s), ApprovalState::kExpired);
  EXPECT_EQ(book.take(b, t0 + 3s), ApprovalState::kUnknown);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[3], std::make_tuple(b, TicketEvent::kExpired, std::optional<uint32_t>()));
}

// A held request whose guest went (its connection closed, its HTTP/2 stream
// reset) leaves the book at once, and its ask ends with exactly one
// reported outcome: cancelled if it was pending, else the decision or
// expiry it already had (reported then, or now for an expiry, never twice).
TEST(ApprovalBook, AGuestsCancelRemovesItsTicketWithOneOutcome) {
  std::vector<std::pair<uint64_t, TicketEvent>> seen;
  ApprovalBook::Options o;
  o.ttl = 2s;
  o.on_ticket = [&](const HeldRequest& h, TicketEvent e, std::optional<uint32_t>) {
    if (e != TicketEvent::kHeld) seen.emplace_back(h.ticket, e);
  };
  ApprovalBook book(o);
  const auto t0 = ApprovalBook::Clock::now();
  const uint64_t pending = book.hold("s", "https", "h", "GET", "/a", t0);
  const uint64_t approved = book.hold("s", "https", "h", "GET", "/b", t0);
  const uint64_t expired = book.hold("s", "https", "h", "GET", "/c", t0);
  const uint64_t kept = book.hold("s", "https", "h", "GET", "/d", t0);
  int woken = 0;
  book.watch(pending, [&] { ++woken; });

  EXPECT_EQ(book.cancel(pending, t0 + 1s), ApprovalState::kCancelled);
  EXPECT_EQ(woken, 0);  // the waiter is the one that cancelled
  ASSERT_TRUE(book.decide(approved, true, t0));
  EXPECT_EQ(book.cancel(approved, t0 + 1s), ApprovalState::kApproved);
  EXPECT_EQ(book.cancel(expired, t0 + 3s), ApprovalState::kExpired);
  // Gone, every one: not listed, not decidable, not cancelled twice.
  const auto listed = book.pending(t0 + 1s);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].ticket, kept);
  for (uint64_t t : {pending, approved, expired}) {
    EXPECT_FALSE(book.decide(t, true, t0 + 1s)) << t;
    EXPECT_EQ(book.cancel(t, t0 + 1s), ApprovalState::kUnknown) << t;
    EXPECT_EQ(book.take(t, t0 + 1s), ApprovalState::kUnknown) << t;
  }
  const std::vector<std::pair<uint64_t, TicketEvent>> want = {{pending, TicketEvent::kCancelled},
                                                              {approved, TicketEvent::kApproved},
                                                              {expired, TicketEvent::kExpired}};
  EXPECT_EQ(seen, want);
  // The positive control: the one nobody cancelled is still decided as usual.
  ASSERT_TRUE(book.decide(kept, false, t0 + 1s));
  EXPECT_EQ(book.take(kept, t0 + 1s), ApprovalState::kDenied);
}

}  // namespace
}  // namespace zn::broker
