#include "broker/resources/kv_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace zn::broker {
namespace {

KvCapability cap(std::string id, AccessMode mode = AccessMode::kReadWrite, KvQuota quota = {}) {
  return KvCapability{std::move(id), mode, quota};
}

class KvStoreTest : public ::testing::Test {
 protected:
  zn::test::TempDir dir_;
  std::string path_ = dir_.file("kv.db");
};

TEST_F(KvStoreTest, PutGetEraseRoundTrip) {
  KvStore store(path_);
  const KvCapability a = cap("cap-a");
  const std::string value("bin\0ary\xff", 8);
  ASSERT_TRUE(store.put(a, "k", value).ok());
  auto got = store.get(a, "k");
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(got.value(), value);
  ASSERT_TRUE(store.put(a, "k", "second").ok());
  EXPECT_EQ(store.get(a, "k").value(), "second");
  ASSERT_TRUE(store.put(a, "empty", "").ok());
  EXPECT_EQ(store.get(a, "empty").value(), "");
  ASSERT_TRUE(store.erase(a, "k").ok());
  EXPECT_EQ(store.get(a, "k").error(), StoreError::kNotFound);
  EXPECT_EQ(store.erase(a, "k").error(), StoreError::kNotFound);
  EXPECT_EQ(store.get(a, "never").error(), StoreError::kNotFound);
}

TEST_F(KvStoreTest, ReadOnlyRefusesWrites) {
  KvStore store(path_);
  const KvCapability writer = cap("shared"), reader = cap("shared", AccessMode::kReadOnly);
  ASSERT_TRUE(store.put(writer, "k", "v").ok());  // positive control: the same write, rw
  auto put = store.put(reader, "k", "changed");
  ASSERT_FALSE(put.ok());
  EXPECT_EQ(put.error(), StoreError::kReadOnly);
  auto erase = store.erase(reader, "k");
  ASSERT_FALSE(erase.ok());
  EXPECT_EQ(erase.error(), StoreError::kReadOnly);
  EXPECT_EQ(store.get(reader, "k").value(), "v");
  EXPECT_EQ(store.put(reader, "new", "v").error(), StoreError::kReadOnly);
  EXPECT_EQ(store.get(reader, "new").error(), StoreError::kNotFound);
}

TEST_F(KvStoreTest, OneCapabilitysKeysAreInvisibleToAnother) {
  KvStore store(path_);
  const KvCapability a = cap("cap-a"), b = cap("cap-b");
  ASSERT_TRUE(store.put(a, "k", "a's").ok());
  EXPECT_EQ(store.get(b, "k").error(), StoreError::kNotFound);
  EXPECT_EQ(store.erase(b, "k").error(), StoreError::kNotFound);
  ASSERT_TRUE(store.put(b, "k", "b's").ok());
  EXPECT_EQ(store.get(a, "k").value(), "a's");
  EXPECT_EQ(store.get(b, "k").value(), "b's");
  // An id that is a prefix of another shares nothing either.
  EXPECT_EQ(store.get(cap("cap-"), "k").error(), StoreError::kNotFound);
  auto dropped = store.erase_capability("cap-a");
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped.value(), 1u);
  EXPECT_EQ(store.get(a, "k").error(), StoreError::kNotFound);
  EXPECT_EQ(store.get(b, "k").value(), "b's");
}

TEST_F(KvStoreTest, KeysAreBounded) {
  KvStore store(path_);
  const KvCapability a = cap("a");
  EXPECT_EQ(store.put(a, "", "v").error(), StoreError::kBadRequest);
  EXPECT_EQ(store.get(a, "").error(), StoreError::kBadRequest);
  EXPECT_EQ(store.put(a, std::string(513, 'k'), "v").error(), StoreError::kBadRequest);
  EXPECT_EQ(store.put(a, std::string("a\0b", 3), "v").error(), StoreError::kBadRequest);
  EXPECT_EQ(store.get(a, std::string("a\0b", 3)).error(), StoreError::kBadRequest);
  ASSERT_TRUE(store.put(a, std::string(512, 'k'), "v").ok());
  ASSERT_TRUE(store.put(a, "\xff\x01 any/bytes?", "v").ok());
  EXPECT_EQ(store.get(a, "\xff\x01 any/bytes?").value(), "v");
}

TEST_F(KvStoreTest, QuotasHold) {
  KvStore store(path_);
  KvQuota q;
  q.max_value_bytes = 50;
  q.max_bytes = 100;
  q.max_keys = 3;
  const KvCapability a = cap("a", AccessMode::kReadWrite, q);
  EXPECT_EQ(store.put(a, "big", std::string(51, 'v')).error(), StoreError::kTooLarge);
  ASSERT_TRUE(store.put(a, "a", std::string(50, 'v')).ok());  // 51 bytes
  ASSERT_TRUE(store.put(a, "b", std::string(40, 'v')).ok());  // 92
  auto over = store.put(a, "c", std::string(10, 'v'));        // 103
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error(), StoreError::kQuotaExceeded);
  EXPECT_NE(over.message().find("byte quota"), std::string::npos) << over.message();
  EXPECT_EQ(store.get(a, "c").error(), StoreError::kNotFound);
  ASSERT_TRUE(store.put(a, "a", std::string(10, 'v')).ok());  // an overwrite frees: 52
  ASSERT_TRUE(store.put(a, "c", std::string(10, 'v')).ok());  // 63, three keys
  auto keys = store.put(a, "d", "");
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.error(), StoreError::kQuotaExceeded);
  EXPECT_NE(keys.message().find("key quota"), std::string::npos) << keys.message();
  ASSERT_TRUE(store.erase(a, "b").ok());
  ASSERT_TRUE(store.put(a, "d", "").ok());
  // Another capability has its own quota.
  ASSERT_TRUE(store.put(cap("other", AccessMode::kReadWrite, q), "x", std::string(50, 'v')).ok());
}

TEST_F(KvStoreTest, UsageSurvivesAReopen) {
  KvQuota q;
  q.max_bytes = 100;
  const KvCapability a = cap("a", AccessMode::kReadWrite, q);
  {
    KvStore store(path_);
    ASSERT_TRUE(store.put(a, "k", std::string(90, 'v')).ok());
  }
  KvStore store(path_);
  EXPECT_EQ(store.put(a, "l", std::string(20, 'v')).error(), StoreError::kQuotaExceeded);
  EXPECT_EQ(store.get(a, "k").value().size(), 90u);
}

TEST_F(KvStoreTest, ConcurrentWritersCannotOvershootTheQuota) {
  KvStore store(path_);
  KvQuota q;
  q.max_keys = 100;
  const KvCapability a = cap("a", AccessMode::kReadWrite, q);
  std::atomic<int> stored{0}, refused{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto r = store.put(a, "k" + std::to_string(t) + "-" + std::to_string(i), "0123456789");
        if (r.ok())
          ++stored;
        else if (r.error() == StoreError::kQuotaExceeded)
          ++refused;
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(stored.load(), 100);
  EXPECT_EQ(refused.load(), 100);
  EXPECT_EQ(store.put(a, "one-more", "").error(), StoreError::kQuotaExceeded);
  ASSERT_TRUE(store.erase(a, "k0-0").ok() || store.erase(a, "k1-0").ok() || store.erase(a, "k2-0").ok() ||
              store.erase(a, "k3-0").ok());
  EXPECT_TRUE(store.put(a, "one-more", "").ok());
}

}  // namespace
}  // namespace zn::broker
