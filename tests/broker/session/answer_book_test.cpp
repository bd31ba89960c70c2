// What governed DNS told one session, bounded: a flood of names keeps it at
// its bound, the names in use survive (least recently used go first),
// expired ones go before any live one and are not counted, an evicted name
// is told again by a new answer. (Each session has its own book, in its own
// state: dns_policy_test shows one session's flood never touches another's.)
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
  explicit Book(size_t max) : book(max) {}
  Clock::time_point now = Clock::now();
  DnsAnswerBook book;
  size_t evictions = 0;
  void record(const std::string& name, const std::vector<net::IpAddress>& addresses, uint32_t ttl) {
    evictions += book.record(name, addresses, ttl, now);
  }
  std::vector<net::IpAddress> lookup(const std::string& name) { return book.lookup(name, now); }
};

TEST(DnsAnswerBook, AFloodOfRandomNamesStaysAtTheBound) {
  Book b(64);
  std::mt19937 rng(7);
  b.record("api.example.com", {addr("198.18.0.20")}, 300);
  for (int i = 0; i < 10000; ++i) {
    b.record(random_name(rng), {addr("198.18.0.21")}, 300);
    ASSERT_LE(b.book.size(), 64u);
    // The name the guest keeps using is looked up between the flood's names
    // (each new connection does): it is never the least recently used.
    if (i % 32 == 0) {
      ASSERT_FALSE(b.lookup("api.example.com").empty()) << i;
    }
  }
  EXPECT_EQ(b.book.size(), 64u);
  EXPECT_EQ(b.evictions, 10000u + 1 - 64);
  EXPECT_EQ(b.lookup("api.example.com"), std::vector<net::IpAddress>{addr("198.18.0.20")});
}

TEST(DnsAnswerBook, AnEvictedNameIsRefusedUntilToldAgain) {
  Book b(2);
  b.record("a.example.com", {addr("198.18.0.1")}, 300);
  b.record("b.example.com", {addr("198.18.0.2")}, 300);
  EXPECT_FALSE(b.lookup("a.example.com").empty());  // a is now the most recent
  b.record("c.example.com", {addr("198.18.0.3")}, 300);
  // b was the least recently used: gone, fail closed.
  EXPECT_TRUE(b.lookup("b.example.com").empty());
  EXPECT_FALSE(b.lookup("a.example.com").empty());
  EXPECT_FALSE(b.lookup("c.example.com").empty());
  EXPECT_EQ(b.evictions, 1u);
  // Resolved again: told again, reachable again.
  b.record("b.example.com", {addr("198.18.0.2")}, 300);
  EXPECT_EQ(b.lookup("b.example.com"), std::vector<net::IpAddress>{addr("198.18.0.2")});
}

TEST(DnsAnswerBook, ExpiredAnswersGoFirstAndAreNotEvictions) {
  Book b(3);
  b.record("short.example.com", {addr("198.18.0.1")}, 5);
  b.record("long1.example.com", {addr("198.18.0.2")}, 300);
  b.record("long2.example.com", {addr("198.18.0.3")}, 300);
  // The short-lived one is the most recently used, but it has expired:
  // it makes the room, not the least recently used live answer.
  EXPECT_FALSE(b.lookup("short.example.com").empty());
  b.now += std::chrono::seconds(6);
  b.record("new.example.com", {addr("198.18.0.4")}, 300);
  EXPECT_EQ(b.evictions, 0u);
  EXPECT_EQ(b.book.size(), 3u);
  EXPECT_FALSE(b.lookup("long1.example.com").empty());
  EXPECT_FALSE(b.lookup("long2.example.com").empty());
  EXPECT_TRUE(b.lookup("short.example.com").empty());
  // Positive control: an answer within its TTL is kept as it was told,
  // merged across families.
  b.record("long1.example.com", {addr("2001:db8:18::2")}, 300);
  EXPECT_EQ(b.lookup("long1.example.com").size(), 2u);
}

}  // namespace
}  // namespace zn::broker::test
