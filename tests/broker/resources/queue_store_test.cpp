#include "broker/resources/queue_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "support/temp_dir.h"

namespace zn::broker {
namespace {

using std::chrono::milliseconds;

class QueueStoreTest : public ::testing::Test {
 protected:
  zn::test::TempDir dir_;
  milliseconds now_{1'000'000};
};

TEST_F(QueueStoreTest, SendReceiveAck) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  const QueueCapability jobs{"jobs", {}};
  auto empty = q.receive(jobs, milliseconds(1000));
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_FALSE(empty.value().has_value());
  auto first = q.send(jobs, "job 1");
  auto second = q.send(jobs, std::string("job\0 2", 6));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first.value().size(), 32u);
  EXPECT_NE(first.value(), second.value());

  auto got = q.receive(jobs, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got.value().has_value());
  EXPECT_EQ(got.value()->id, first.value());  // oldest first
  EXPECT_EQ(got.value()->body, "job 1");
  EXPECT_EQ(got.value()->deliveries, 1u);
  auto next = q.receive(jobs, milliseconds(1000));
  ASSERT_TRUE(next.ok() && next.value().has_value());
  EXPECT_EQ(next.value()->body, std::string("job\0 2", 6));
  auto none = q.receive(jobs, milliseconds(1000));  // both hidden
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());

  ASSERT_TRUE(q.ack(jobs, got.value()->receipt).ok());
  EXPECT_EQ(q.ack(jobs, got.value()->receipt).error(), StoreError::kNotFound);  // once
  EXPECT_EQ(q.ack(jobs, "not-a-receipt").error(), StoreError::kNotFound);
}

TEST_F(QueueStoreTest, AnUnackedMessageComesBackAndTheOldReceiptIsVoid) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  const QueueCapability jobs{"jobs", {}};
  ASSERT_TRUE(q.send(jobs, "work").ok());
  auto first = q.receive(jobs, milliseconds(500));
  ASSERT_TRUE(first.ok() && first.value().has_value());
  now_ += milliseconds(499);
  EXPECT_FALSE(q.receive(jobs, milliseconds(500)).value().has_value());
  now_ += milliseconds(2);
  auto again = q.receive(jobs, milliseconds(500));
  ASSERT_TRUE(again.ok() && again.value().has_value());
  EXPECT_EQ(again.value()->id, first.value()->id);
  EXPECT_EQ(again.value()->deliveries, 2u);
  EXPECT_NE(again.value()->receipt, first.value()->receipt);
  EXPECT_EQ(q.ack(jobs, first.value()->receipt).error(), StoreError::kNotFound);
  ASSERT_TRUE(q.ack(jobs, again.value()->receipt).ok());
  now_ += milliseconds(10000);
  EXPECT_FALSE(q.receive(jobs, milliseconds(500)).value().has_value());
}

TEST_F(QueueStoreTest, AnExpiredDeliveryCannotBeAcked) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  const QueueCapability jobs{"jobs", {}};
  ASSERT_TRUE(q.send(jobs, "work").ok());
  auto got = q.receive(jobs, milliseconds(100));
  now_ += milliseconds(100);
  EXPECT_EQ(q.ack(jobs, got.value()->receipt).error(), StoreError::kNotFound);
  auto again = q.receive(jobs, milliseconds(100));  // still there
  ASSERT_TRUE(again.ok() && again.value().has_value());
}

TEST_F(QueueStoreTest, QueuesOfCapabilitiesAreApart) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  const QueueCapability a{"a", {}}, b{"b", {}};
  ASSERT_TRUE(q.send(a, "for a").ok());
  EXPECT_FALSE(q.receive(b, milliseconds(1000)).value().has_value());
  auto got = q.receive(a, milliseconds(1000));
  ASSERT_TRUE(got.ok() && got.value().has_value());
  EXPECT_EQ(q.ack(b, got.value()->receipt).error(), StoreError::kNotFound);  // b cannot ack a's delivery
  EXPECT_TRUE(q.ack(a, got.value()->receipt).ok());
}

TEST_F(QueueStoreTest, QuotasHold) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  QueueQuota quota;
  quota.max_message_bytes = 10;
  quota.max_messages = 3;
  quota.max_bytes = 25;
  const QueueCapability a{"a", quota};
  EXPECT_EQ(q.send(a, std::string(11, 'm')).error(), StoreError::kTooLarge);
  ASSERT_TRUE(q.send(a, std::string(10, 'm')).ok());
  ASSERT_TRUE(q.send(a, std::string(10, 'm')).ok());
  EXPECT_EQ(q.send(a, std::string(10, 'm')).error(), StoreError::kQuotaExceeded);  // 30 bytes
  ASSERT_TRUE(q.send(a, std::string(5, 'm')).ok());                                // 25 bytes, 3 messages
  auto count = q.send(a, "");
  EXPECT_EQ(count.error(), StoreError::kQuotaExceeded);
  EXPECT_NE(count.message().find("message quota"), std::string::npos) << count.message();
  auto got = q.receive(a, milliseconds(1000));
  ASSERT_TRUE(q.ack(a, got.value()->receipt).ok());
  EXPECT_TRUE(q.send(a, "").ok());
  EXPECT_EQ(q.receive(a, milliseconds(0)).error(), StoreError::kBadRequest);
}

TEST_F(QueueStoreTest, EraseCapabilityRemovesOnlyThatCapabilitysMessages) {
  QueueStore q(dir_.file("queue.db"), [this] { return now_; });
  QueueQuota quota;
  quota.max_messages = 2;
  const QueueCapability gone{"gone", quota}, kept{"kept", {}};
  ASSERT_TRUE(q.send(gone, "queued").ok());
  ASSERT_TRUE(q.send(gone, "in flight").ok());
  ASSERT_TRUE(q.send(kept, "stays").ok());
  ASSERT_TRUE(q.receive(gone, milliseconds(1000)).value().has_value());  // a delivered one goes too
  EXPECT_EQ(q.send(gone, "third").error(), StoreError::kQuotaExceeded);  // positive control: both count

  auto erased = q.erase_capability("gone");
  ASSERT_TRUE(erased.ok()) << erased.message();
  EXPECT_EQ(erased.value(), 2u);
  now_ += milliseconds(10000);  // the in-flight one would be visible again by now
  EXPECT_FALSE(q.receive(gone, milliseconds(1000)).value().has_value());
  auto other = q.receive(kept, milliseconds(1000));
  ASSERT_TRUE(other.ok() && other.value().has_value());
  EXPECT_EQ(other.value()->body, "stays");
  EXPECT_TRUE(q.send(gone, "a").ok());  // the quota counts from nothing again
  EXPECT_TRUE(q.send(gone, "b").ok());
  EXPECT_EQ(q.erase_capability("never-was").value(), 0u);
}

}  // namespace
}  // namespace zn::broker
