// The session index: every key finds the session it was published with, a
// replacement re-indexes (an old key no longer finds it), and readers never
// see a torn entry while a writer swaps snapshots (run under TSan in CI).
#include "broker/session/index.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace zn::broker {
namespace {

SessionPtr make(const std::string& id, uint32_t idx, int ifindex, const char* ip4, const char* ip6,
                uint64_t version = 1) {
  auto s = std::make_shared<Session>();
  s->record.id = id;
  s->record.session_idx = idx;
  s->record.policy_version = version;
  s->ifindex = ifindex;
  inet_pton(AF_INET, ip4, &s->net.guest_ip4);
  inet_pton(AF_INET6, ip6, &s->net.guest_ip6);
  return s;
}

in_addr v4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  return a;
}
in6_addr v6(const char* text) {
  in6_addr a{};
  inet_pton(AF_INET6, text, &a);
  return a;
}

TEST(SessionIndexTest, EveryKeyFindsThePublishedSession) {
  SessionIndex index;
  index.put(make("a", 1, 10, "198.19.0.2", "2001:db8:19::2"));
  index.put(make("b", 2, 11, "198.19.1.2", "2001:db8:19:1::2"));
  EXPECT_EQ(index.by_id("a")->record.id, "a");
  EXPECT_EQ(index.by_guest_ip4(v4("198.19.1.2"))->record.id, "b");
  EXPECT_EQ(index.by_guest_ip6(v6("2001:db8:19::2"))->record.id, "a");
  EXPECT_EQ(index.by_ifindex(11)->record.id, "b");
  EXPECT_EQ(index.by_session_idx(1)->record.id, "a");
  // Nothing else matches: a neighbour's address, an unknown index.
  EXPECT_FALSE(index.by_id("c"));
  EXPECT_FALSE(index.by_guest_ip4(v4("198.19.0.3")));
  EXPECT_FALSE(index.by_guest_ip6(v6("2001:db8:19::3")));
  EXPECT_FALSE(index.by_ifindex(12));
  EXPECT_FALSE(index.by_session_idx(3));
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index.all()[0]->record.id, "a");  // id order
}

TEST(SessionIndexTest, AReplacementReindexesAndEraseRemovesEveryKey) {
  SessionIndex index;
  index.put(make("a", 1, 10, "198.19.0.2", "2001:db8:19::2"));
  SessionPtr held = index.by_id("a");
  // Same id, other keys (a re-adopted device, say) and a newer policy.
  index.put(make("a", 1, 20, "198.19.0.2", "2001:db8:19::2", 2));
  EXPECT_EQ(index.by_id("a")->record.policy_version, 2u);
  EXPECT_FALSE(index.by_ifindex(10));
  EXPECT_EQ(index.by_ifindex(20)->record.policy_version, 2u);
  EXPECT_EQ(held->record.policy_version, 1u);  // a reader's snapshot does not change under it
  EXPECT_EQ(index.erase("a")->record.policy_version, 2u);
  EXPECT_FALSE(index.by_id("a"));
  EXPECT_FALSE(index.by_guest_ip4(v4("198.19.0.2")));
  EXPECT_FALSE(index.by_guest_ip6(v6("2001:db8:19::2")));
  EXPECT_FALSE(index.by_ifindex(20));
  EXPECT_FALSE(index.by_session_idx(1));
  EXPECT_FALSE(index.erase("a"));
  EXPECT_EQ(index.size(), 0u);
}

TEST(SessionIndexTest, ReadersSeeWholeSnapshotsWhileAWriterSwaps) {
  SessionIndex index;
  index.put(make("a", 1, 10, "198.19.0.2", "2001:db8:19::2"));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> seen{0}, torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t)
    readers.emplace_back([&] {
      while (!stop) {
        SessionPtr s = index.by_guest_ip4(v4("198.19.0.2"));
        if (!s) continue;  // between an erase and a put
        // Each snapshot was built with ifindex == 100 + version.
        if (s->ifindex != static_cast<int>(100 + s->record.policy_version) && s->record.policy_version != 1)
          torn++;
        seen++;
      }
    });
  // Readers first: on a loaded machine the writer could otherwise finish
  // before any reader thread has run, and the test would prove nothing.
  while (seen.load() < 3) std::this_thread::yield();
  for (uint64_t v = 2; v < 2000; ++v) {
    index.put(make("a", 1, static_cast<int>(100 + v), "198.19.0.2", "2001:db8:19::2", v));
    if (v % 100 == 0) index.erase("a");
  }
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(seen.load(), 0u);
  EXPECT_EQ(index.size(), 0u + (index.by_id("a") ? 1u : 0u));
}

}  // namespace
}  // namespace zn::broker
