#include "broker/exposure/ticket_book.h"

#include <gtest/gtest.h>

#include <set>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

struct FakeClock {
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1000h;
};

class TicketBookTest : public ::testing::Test {
 protected:
  TicketBook::Limits limits{4, 3};
  FakeClock clock;
  TicketBook book{limits, [this] { return clock.now; }};
};

TEST_F(TicketBookTest, ATicketAdmitsOnceThenReadsAsUsed) {
  const MintedTicket t = book.mint("s1", 8080, 60s);
  EXPECT_TRUE(t.ticket.starts_with("znt_"));
  EXPECT_EQ(t.ticket.size(), 36u);
  EXPECT_EQ(book.outstanding("s1"), 1u);
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kOk);
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kUsed);
  EXPECT_EQ(book.outstanding("s1"), 0u);
}

TEST_F(TicketBookTest, AnotherSessionsTicketReadsAsUnknown) {
  const MintedTicket t = book.mint("s1", 8080, 60s);
  EXPECT_EQ(book.redeem("s2", 8080, t.ticket), TicketVerdict::kUnknown);
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket + "x"), TicketVerdict::kUnknown);
  EXPECT_EQ(book.redeem("s1", 8080, ""), TicketVerdict::kUnknown);
  // Still good for its own session: the wrong tries spent nothing.
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kOk);
}

TEST_F(TicketBookTest, AWrongPortSpendsTheTicket) {
  const MintedTicket t = book.mint("s1", 8080, 60s);
  EXPECT_EQ(book.redeem("s1", 8081, t.ticket), TicketVerdict::kWrongPort);
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kUsed);
}

TEST_F(TicketBookTest, ExpiryAndForgetting) {
  const MintedTicket t = book.mint("s1", 8080, 10s);
  clock.now += 10s;
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kExpired);
  // Known as expired for a while (the audit's reason), then forgotten.
  clock.now += 5min;
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kExpired);
  clock.now += 6min;
  EXPECT_EQ(book.redeem("s1", 8080, t.ticket), TicketVerdict::kUnknown);
  const MintedTicket u = book.mint("s1", 8080, 10s);
  book.forget("s1", 8080);
  EXPECT_EQ(book.redeem("s1", 8080, u.ticket), TicketVerdict::kUnknown);
  const MintedTicket v = book.mint("s1", 8081, 10s);
  book.forget_session("s1");
  EXPECT_EQ(book.redeem("s1", 8081, v.ticket), TicketVerdict::kUnknown);
}

TEST_F(TicketBookTest, OutstandingTicketsAreBoundedPerSession) {
  for (int i = 0; i < 4; ++i) book.mint("s1", 8080, 60s);
  EXPECT_THROW(book.mint("s1", 8080, 60s), std::runtime_error);
  book.mint("s2", 8080, 60s);  // another session's budget
  clock.now += 61s;            // expired ones free their places
  book.mint("s1", 8080, 60s);
}

TEST_F(TicketBookTest, ABindingIsItsClientsAndPortsUntilItExpires) {
  const std::string b = book.bind("s1", 8080, "127.0.0.1", 30s);
  EXPECT_TRUE(b.starts_with("znb_"));
  std::chrono::steady_clock::time_point until;
  EXPECT_EQ(book.check_binding("s1", 8080, b, "127.0.0.1", &until), TicketBook::BindingVerdict::kOk);
  EXPECT_EQ(until, clock.now + 30s);
  EXPECT_EQ(book.check_binding("s1", 8080, b, "127.0.0.2", nullptr),
            TicketBook::BindingVerdict::kOtherClient);
  EXPECT_EQ(book.check_binding("s1", 8081, b, "127.0.0.1", nullptr), TicketBook::BindingVerdict::kUnknown);
  EXPECT_EQ(book.check_binding("s2", 8080, b, "127.0.0.1", nullptr), TicketBook::BindingVerdict::kUnknown);
  clock.now += 30s;
  EXPECT_EQ(book.check_binding("s1", 8080, b, "127.0.0.1", nullptr), TicketBook::BindingVerdict::kExpired);
}

TEST_F(TicketBookTest, BindingsAreBoundedTheOldestGoingFirst) {
  const std::string first = book.bind("s1", 8080, "c", 10s);
  clock.now += 1s;
  book.bind("s1", 8080, "c", 10s);
  book.bind("s1", 8080, "c", 10s);
  const std::string fourth = book.bind("s1", 8080, "c", 10s);
  EXPECT_EQ(book.check_binding("s1", 8080, first, "c", nullptr), TicketBook::BindingVerdict::kUnknown);
  EXPECT_EQ(book.check_binding("s1", 8080, fourth, "c", nullptr), TicketBook::BindingVerdict::kOk);
}

TEST_F(TicketBookTest, TicketsAreDistinct) {
  std::set<std::string> seen;
  TicketBook big;
  for (int i = 0; i < 200; ++i) seen.insert(big.mint("s", 1, 60s).ticket);
  EXPECT_EQ(seen.size(), 200u);
}

}  // namespace
}  // namespace zn::broker
