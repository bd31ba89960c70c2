// KV capabilities' backing store: one operator-named SQLite file holding the
// namespaces of many capabilities, each keyed by an opaque capability id the
// caller gives (issue 13).
//
// One shared file rather than a file per capability: capabilities come and
// go with sessions, and a file each would mean creating, naming and cleaning
// up files (and a descriptor each) on the data path's behalf; one file is one
// thing for the operator to name, back up and size. Isolation is by the
// primary key: every statement binds the capability id, there is no
// statement without it, and there is no listing operation at all (no
// enumeration by design, within or across capabilities). Deleted values are
// zeroed on disk (secure_delete), since the file is shared.
//
// Quotas per capability (the caller's KvCapability, from the policy): total
// bytes (keys plus values) and number of keys, tracked in a usage table
// updated in the same transaction as the write, so they hold across restarts
// and concurrent callers. A write is durable when it returns (WAL,
// synchronous=FULL).
//
// Threads: every call may block (SQLite, fsync); call off the proxy's loop,
// from any thread. Calls are serialised on one connection.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "broker/resources/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace zn::broker {

struct KvQuota {
  size_t max_value_bytes = 1024 * 1024;
  uint64_t max_bytes = 64 * 1024 * 1024;  // keys plus values
  uint64_t max_keys = 100000;
};

// One capability as the store sees it. The id is opaque (the session layer's
// stable name for the binding, not the guest's handle).
struct KvCapability {
  std::string id;
  AccessMode mode = AccessMode::kReadOnly;
  KvQuota quota;
};

class KvStore {
 public:
  static constexpr size_t kMaxKeyBytes = 512;

  // Opens (creating when missing) the file and its schema. Throws
  // std::runtime_error (setup).
  explicit KvStore(const std::string& path);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // A key is 1..kMaxKeyBytes bytes of anything but NUL.
  StoreResult<std::string> get(const KvCapability& cap, std::string_view key);
  StoreStatus put(const KvCapability& cap, std::string_view key, std::string_view value);
  StoreStatus erase(const KvCapability& cap, std::string_view key);

  // Control plane: removes every key of a capability the operator dropped
  // (whatever its mode). Returns how many keys went.
  StoreResult<uint64_t> erase_capability(std::string_view cap_id);

 private:
  struct Usage {
    uint64_t bytes = 0, keys = 0;
  };
  StoreResult<Usage> usage(std::string_view cap_id);
  StoreStatus set_usage(std::string_view cap_id, Usage u);
  bool exec(const char* sql);
  StoreFailure internal(const char* what);

  sqlite3* db_ = nullptr;
  std::mutex mutex_;
  sqlite3_stmt* get_ = nullptr;
  sqlite3_stmt* size_ = nullptr;
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* erase_ = nullptr;
  sqlite3_stmt* erase_all_ = nullptr;
  sqlite3_stmt* usage_ = nullptr;
  sqlite3_stmt* set_usage_ = nullptr;
  sqlite3_stmt* drop_usage_ = nullptr;
};

}  // namespace zn::broker
