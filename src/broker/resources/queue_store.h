// Queue capabilities' backing store: one operator-named SQLite file holding
// the queues of many capabilities, keyed by an opaque capability id, like
// KvStore (issue 13).
//
// send appends a message; receive hands out the oldest visible one and hides
// it for the visibility timeout; ack deletes it. A message not acked in time
// is visible again and redelivered (at least once). Each delivery has its own
// random receipt and ack takes the receipt, so a consumer whose timeout ran
// out cannot delete the message another consumer now holds. Message ids are
// random too, never a counter shared across capabilities, so one tenant
// cannot count another's traffic.
//
// Quotas per capability: the number of messages queued and their total
// bytes (kQuotaExceeded), and one message's size (kTooLarge). A queue
// capability has no read-only mode: receiving changes the queue.
//
// Threads: every call may block (SQLite, fsync); call off the proxy's loop,
// from any thread. Calls are serialised on one connection. The clock is
// injectable for tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "broker/resources/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace zn::broker {

struct QueueQuota {
  size_t max_message_bytes = 256 * 1024;
  uint64_t max_messages = 10000;
  uint64_t max_bytes = 64 * 1024 * 1024;
};

struct QueueCapability {
  std::string id;  // opaque, as for KvCapability
  QueueQuota quota;
};

struct QueueMessage {
  std::string id;       // the message's, stable across deliveries (32 hex digits)
  std::string receipt;  // this delivery's, for ack (32 hex digits)
  std::string body;
  uint32_t deliveries = 0;  // 1 on the first receive
};

class QueueStore {
 public:
  static constexpr std::chrono::milliseconds kMaxVisibility{12 * 60 * 60 * 1000};

  using Clock = std::function<std::chrono::milliseconds()>;  // since any fixed epoch

  // Opens (creating when missing) the file. Throws std::runtime_error
  // (setup). Without a clock, the system clock.
  explicit QueueStore(const std::string& path, Clock clock = {});
  ~QueueStore();
  QueueStore(const QueueStore&) = delete;
  QueueStore& operator=(const QueueStore&) = delete;

  // The new message's id.
  StoreResult<std::string> send(const QueueCapability& cap, std::string_view body);
  // The oldest visible message, hidden for `visibility` (1 ms .. kMaxVisibility),
  // or nullopt when none is visible.
  StoreResult<std::optional<QueueMessage>> receive(const QueueCapability& cap,
                                                   std::chrono::milliseconds visibility);
  // Deletes the message delivered with this receipt, if it is still the
  // latest delivery and still hidden; kNotFound otherwise.
  StoreStatus ack(const QueueCapability& cap, std::string_view receipt);

  // Control plane: removes every message of a capability whose session is
  // gone, delivered or not. Returns how many went.
  StoreResult<uint64_t> erase_capability(std::string_view cap_id);

 private:
  bool exec(const char* sql);
  StoreFailure internal(const char* what);
  std::chrono::milliseconds now() const;

  Clock clock_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
  sqlite3_stmt* usage_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* next_ = nullptr;
  sqlite3_stmt* hide_ = nullptr;
  sqlite3_stmt* ack_ = nullptr;
  sqlite3_stmt* erase_all_ = nullptr;
};

}  // namespace zn::broker
