// What governed DNS told each session, bounded: a flood of names keeps it at
// its bound, the names in use survive (least recently used go first),
// expired ones go before any live one and are not counted, an evicted name
// is told again by a new answer. One session's flood never touches
// another's names.
#include "broker/session/answer_book.h"

#include <gtest/gtest.h>

#include <random>

namespace zn::broker::test {
namespace {

using Clock = std::chrono::steady_clock;

net::IpAddress addr(const std::string& text) { return *net::IpAddress::parse(text); }

std::string random_name(std::mt19937& rng) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string label;
  for (int i = 0; i < 20; ++i) label += kChars[rng() % 36];
  return label + ".tunnel.example.com";
}

struct Book {
  explicit Book(size_t max) : book(max, [this] { return now; }) {}
  Clock::time_point now = Clock::now();
  DnsAnswerBook book;
};

TEST(DnsAnswerBook, AFloodOfRandomNamesStaysAtTheBound) {
  Book b(64);
  std::mt19937 rng(7);
  b.book.record("s1", "api.example.com", {addr("198.18.0.20")}, 300);
  for (int i = 0; i < 10000; ++i) {
    b.book.record("s1", random_name(rng), {addr("198.18.0.21")}, 300);
    ASSERT_LE(b.book.size("s1"), 64u);
    // The name the guest keeps using is looked up between the flood's names
    // (each new connection does): it is never the least recently used.
    if (i % 32 == 0) {
      ASSERT_FALSE(b.book.lookup("s1", "api.example.com").empty()) << i;
    }
  }
  EXPECT_EQ(b.book.size("s1"), 64u);
  EXPECT_EQ(b.book.evictions(), 10000u + 1 - 64);
  EXPECT_EQ(b.book.lookup("s1", "api.example.com"), std::vector<net::IpAddress>{addr("198.18.0.20")});
}

TEST(DnsAnswerBook, AnEvictedNameIsRefusedUntilToldAgain) {
  Book b(2);
  b.book.record("s1", "a.example.com", {addr("198.18.0.1")}, 300);
  b.book.record("s1", "b.example.com", {addr("198.18.0.2")}, 300);
  EXPECT_FALSE(b.book.lookup("s1", "a.example.com").empty());  // a is now the most recent
  b.book.record("s1", "c.example.com", {addr("198.18.0.3")}, 300);
  // b was the least recently used: gone, fail closed.
  EXPECT_TRUE(b.book.lookup("s1", "b.example.com").empty());
  EXPECT_FALSE(b.book.lookup("s1", "a.example.com").empty());
  EXPECT_FALSE(b.book.lookup("s1", "c.example.com").empty());
  EXPECT_EQ(b.book.evictions(), 1u);
  // Resolved again: told again, reachable again.
  b.book.record("s1", "b.example.com", {addr("198.18.0.2")}, 300);
  EXPECT_EQ(b.book.lookup("s1", "b.example.com"), std::vector<net::IpAddress>{addr("198.18.0.2")});
}

TEST(DnsAnswerBook, ExpiredAnswersGoFirstAndAreNotEvictions) {
  Book b(3);
  b.book.record("s1", "short.example.com", {addr("198.18.0.1")}, 5);
  b.book.record("s1", "long1.example.com", {addr("198.18.0.2")}, 300);
  b.book.record("s1", "long2.example.com", {addr("198.18.0.3")}, 300);
  // The short-lived one is the most recently used, but it has expired:
  // it makes the room, not the least recently used live answer.
  EXPECT_FALSE(b.book.lookup("s1", "short.example.com").empty());
  b.now += std::chrono::seconds(6);
  b.book.record("s1", "new.example.com", {addr("198.18.0.4")}, 300);
  EXPECT_EQ(b.book.evictions(), 0u);
  EXPECT_EQ(b.book.size("s1"), 3u);
  EXPECT_FALSE(b.book.lookup("s1", "long1.example.com").empty());
  EXPECT_FALSE(b.book.lookup("s1", "long2.example.com").empty());
  EXPECT_TRUE(b.book.lookup("s1", "short.example.com").empty());
  // Positive control: an answer within its TTL is kept as it was told,
  // merged across families.
  b.book.record("s1", "long1.example.com", {addr("2001:db8:18::2")}, 300);
  EXPECT_EQ(b.book.lookup("s1", "long1.example.com").size(), 2u);
}

TEST(DnsAnswerBook, OneSessionsFloodLeavesTheOthersNames) {
  Book b(8);
  std::mt19937 rng(11);
  b.book.record("quiet", "api.example.com", {addr("198.18.0.20")}, 300);
  for (int i = 0; i < 1000; ++i) b.book.record("noisy", random_name(rng), {addr("198.18.0.21")}, 300);
  EXPECT_EQ(b.book.lookup("quiet", "api.example.com"), std::vector<net::IpAddress>{addr("198.18.0.20")});
  EXPECT_TRUE(b.book.lookup("noisy", "api.example.com").empty());  // told to quiet only
  b.book.forget("noisy");
  EXPECT_EQ(b.book.size("noisy"), 0u);
  EXPECT_EQ(b.book.size("quiet"), 1u);
}

}  // namespace
}  // namespace zn::broker::test
