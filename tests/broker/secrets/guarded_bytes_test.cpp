#include "broker/secrets/guarded_bytes.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

namespace zn::broker {
namespace {

// One read through the raw pointer, outside with_bytes. The sanitizers'
// SIGSEGV handlers would turn the fault into a report and an exit code;
// the default action lets the test see the kernel's verdict itself.
void touch(const unsigned char* p) {
  std::signal(SIGSEGV, SIG_DFL);
  volatile unsigned char c = *static_cast<const volatile unsigned char*>(p);
  (void)c;
  std::_Exit(0);  // reached only if the page was readable
}

class GuardedBytesDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(GuardedBytesDeathTest, IdlePagesAreNoAccess) {
  GuardedBytes b(std::string_view("sk_live_guarded"));
  EXPECT_EXIT(touch(b.address_for_tests()), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(GuardedBytesDeathTest, NoAccessAgainAfterARead) {
  GuardedBytes b(std::string_view("sk_live_guarded"));
  b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
  EXPECT_EXIT(touch(b.address_for_tests()), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(GuardedBytesDeathTest, RandomAndFilledBytesAreNoAccessToo) {
  GuardedBytes r(32, GuardedBytes::Random{});
  EXPECT_EXIT(touch(r.address_for_tests()), ::testing::KilledBySignal(SIGSEGV), "");
  GuardedBytes f(8, GuardedBytes::Fill{},
                 [](std::span<unsigned char> out) { std::fill(out.begin(), out.end(), 7); });
  EXPECT_EXIT(touch(f.address_for_tests()), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(GuardedBytesDeathTest, NoAccessAgainAfterOverlappingReads) {
  GuardedBytes b(std::string_view("sk_live_guarded"));
  // Nested reads on one thread and reads on others: the count returns to 0.
  b.with_bytes([&](std::span<const unsigned char>) {
    std::thread other([&] { b.with_bytes([](std::span<const unsigned char> s) { return s.size(); }); });
    other.join();
    b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
  });
  EXPECT_EXIT(touch(b.address_for_tests()), ::testing::KilledBySignal(SIGSEGV), "");
}

// The positive control for the death tests: the same read inside
// with_bytes works, and in a child process too (so the death tests' children
// crash for the protection, not for being children).
TEST_F(GuardedBytesDeathTest, ReadingInsideWithBytesWorks) {
  GuardedBytes b(std::string_view("sk_live_guarded"));
  unsigned char first = b.with_bytes([&](std::span<const unsigned char>) {
    return *static_cast<const volatile unsigned char*>(b.address_for_tests());
  });
  EXPECT_EQ(first, 's');
  EXPECT_EXIT(b.with_bytes([&](std::span<const unsigned char>) { touch(b.address_for_tests()); }),
              ::testing::ExitedWithCode(0), "");
}

// With a read linger the pages stay readable after a read (the positive
// control: the same touch that crashes elsewhere exits cleanly), then go
// no-access by themselves once nobody has read them for the linger.
TEST_F(GuardedBytesDeathTest, ALingerKeepsPagesReadableForAWhileThenNoAccess) {
  GuardedBytes::set_read_linger(std::chrono::milliseconds(50));
  struct Reset {
    ~Reset() { GuardedBytes::set_read_linger(std::chrono::milliseconds(0)); }
  } reset;
  GuardedBytes b(std::string_view("sk_live_guarded"));
  EXPECT_FALSE(b.readable_for_tests());
  b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
  EXPECT_TRUE(b.readable_for_tests());
  EXPECT_EXIT(
      {
        b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
        touch(b.address_for_tests());
      },
      ::testing::ExitedWithCode(0), "");
  // Expired by the sweeper (polled: a loaded machine may run it late).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (b.readable_for_tests() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_FALSE(b.readable_for_tests());
  EXPECT_EXIT(
      {
        b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (b.readable_for_tests() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        touch(b.address_for_tests());
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  // Reads that overlap the sweep keep the pages readable while they last.
  b.with_bytes([&](std::span<const unsigned char>) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(*static_cast<const volatile unsigned char*>(b.address_for_tests()), 's');
  });
}

// Destroyed while lingering: the sweeper forgets it (ASan/TSan would see a
// use after free otherwise); and a linger set back to 0 protects at once.
TEST(GuardedBytes, DestroyedWhileLingeringAndLingerOff) {
  GuardedBytes::set_read_linger(std::chrono::milliseconds(30));
  for (int i = 0; i < 50; ++i) {
    GuardedBytes b(std::string_view("sk_live_guarded"));
    b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
    if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  GuardedBytes::set_read_linger(std::chrono::milliseconds(0));
  GuardedBytes b(std::string_view("sk_live_guarded"));
  b.with_bytes([](std::span<const unsigned char> s) { return s.size(); });
  EXPECT_FALSE(b.readable_for_tests());
}

TEST(GuardedBytes, HoldsACopyOfItsInput) {
  std::string value = "sk_live_copy";
  GuardedBytes b(value);
  value.assign(value.size(), 'x');  // the caller's copy is the caller's
  std::string seen = b.with_bytes([](std::span<const unsigned char> s) {
    return std::string(reinterpret_cast<const char*>(s.data()), s.size());
  });
  EXPECT_EQ(seen, "sk_live_copy");
  EXPECT_EQ(b.size(), 12u);
}

TEST(GuardedBytes, EmptyIsAValidValue) {
  GuardedBytes b{std::string_view()};
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.with_bytes([](std::span<const unsigned char> s) { return s.size(); }), 0u);
}

TEST(GuardedBytes, RandomBytesDiffer) {
  GuardedBytes a(32, GuardedBytes::Random{}), b(32, GuardedBytes::Random{});
  bool same = a.with_bytes([&](std::span<const unsigned char> x) {
    return b.with_bytes(
        [&](std::span<const unsigned char> y) { return std::equal(x.begin(), x.end(), y.begin()); });
  });
  EXPECT_FALSE(same);
}

TEST(GuardedBytes, AFillThatThrowsPropagates) {
  EXPECT_THROW(
      GuardedBytes(8, GuardedBytes::Fill{}, [](std::span<unsigned char>) { throw std::runtime_error("x"); }),
      std::runtime_error);
}

TEST(GuardedBytes, AReaderThatThrowsLeavesThePagesUsable) {
  GuardedBytes b(std::string_view("abc"));
  EXPECT_THROW(b.with_bytes([](std::span<const unsigned char>) -> int { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_EQ(b.with_bytes([](std::span<const unsigned char> s) { return s[2]; }), 'c');
}

// Several threads read the same bytes in loops, each read lingering so the
// reads overlap. If the last-reader rule were wrong (a reader ending made
// the pages no-access while another was still reading), the other reader's
// next load would fault and the binary would crash. The overlap is measured,
// so the test fails rather than passes vacuously if the reads never overlap.
TEST(GuardedBytes, ConcurrentReadersNeverLoseThePages) {
  const std::string value(4096 + 100, 'k');  // spans two pages
  GuardedBytes b(value);
  constexpr int kThreads = 4;
  constexpr int kReads = 2000;
  std::atomic<int> inside{0}, most_inside{0};
  std::atomic<long> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kReads; ++i) {
        b.with_bytes([&](std::span<const unsigned char> s) {
          int now = inside.fetch_add(1) + 1;
          int seen = most_inside.load();
          while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
          }
          for (int pass = 0; pass < 3; ++pass) {
            for (unsigned char c : s)
              if (c != 'k') mismatches.fetch_add(1);
            std::this_thread::yield();  // let another reader start or end meanwhile
          }
          inside.fetch_sub(1);
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GE(most_inside.load(), 2) << "the reads never overlapped; the test proved nothing";
}

}  // namespace
}  // namespace zn::broker
