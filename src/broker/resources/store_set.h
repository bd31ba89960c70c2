// The backing stores zerod serves capabilities from, opened from the
// operator's catalog (store_catalog.h), by kind and name (issue 13).
//
// At construction every store is opened or checked, so a bad config stops
// zerod at start rather than failing a guest later: KV and queue files are
// opened (and created), blob directories and SQL files are opened read-only
// (the read-only instances that serve ro capabilities). The read-write
// instance of a blob directory or a SQL file is opened on its first rw use:
// a dataset only ever read is never opened for writing.
//
// Threads: construction and forget are the control plane's. The accessors
// never block on another caller's store call (the lock covers the map of rw
// instances only; an open runs outside it), any thread; the stores they hand
// out say which threads may call them (all: off the proxy's loop). Stores
// live as long as the StoreSet.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "broker/policy/policy.h"
#include "broker/resources/blob_store.h"
#include "broker/resources/kv_store.h"
#include "broker/resources/queue_store.h"
#include "broker/resources/sql_store.h"
#include "broker/resources/store.h"
#include "broker/resources/store_catalog.h"

namespace zn::broker {

// The id a KV or queue capability's namespace is keyed by in the shared
// file: 32 hex digits of SHA-256 of its handle. Stable for as long as the
// handle is (across restarts and policy updates), and never the handle
// itself: the file is not a list of live handles.
std::string capability_store_id(std::string_view handle);

class StoreSet {
 public:
  // A KV or queue store and the per-capability quota the operator set for it.
  struct Kv {
    KvStore* store = nullptr;
    KvQuota quota;
  };
  struct Queue {
    QueueStore* store = nullptr;
    QueueQuota quota;
  };

  // Opens and checks every store of the catalog. Throws std::runtime_error
  // naming the kind, the store and the problem (zerod refuses to start).
  explicit StoreSet(const StoreCatalog& catalog);
  ~StoreSet();
  StoreSet(const StoreSet&) = delete;
  StoreSet& operator=(const StoreSet&) = delete;

  // The store of that kind and name. kInternal "store unavailable" when no
  // such store is configured (missing() refuses such a policy first) or its
  // rw instance cannot be opened; the message is the guest's, so it names
  // no path (the reason is logged once, for the operator).
  StoreResult<Kv> kv(std::string_view name);
  StoreResult<Queue> queue(std::string_view name);
  StoreResult<BlobStore*> blob(std::string_view name, AccessMode mode);
  StoreResult<SqlStore*> sql(std::string_view name, AccessMode mode);

  // Why the capability names no configured store of its kind, nullopt if it
  // does. Zerod refuses a policy (session create or update) that has one.
  std::optional<std::string> missing(const Capability& cap) const;

  // A session is gone: erases a KV capability's keys or a queue
  // capability's messages (cap_id: capability_store_id of its handle).
  // Blob and SQL stores are the operator's data, shared, and keep theirs.
  // kNotFound naming the store when it is not configured (any more).
  StoreStatus forget(CapabilityKind kind, std::string_view store_name, std::string_view cap_id);

 private:
  template <typename Store, typename Config>
  StoreResult<Store*> read_write(std::map<std::string, std::unique_ptr<Store>, std::less<>>& opened,
                                 const std::map<std::string, Config, std::less<>>& configs,
                                 std::string_view kind, std::string_view name);

  // The catalog, re-keyed for lookups by string_view.
  std::map<std::string, KvStoreConfig, std::less<>> kv_config_;
  std::map<std::string, QueueStoreConfig, std::less<>> queue_config_;
  std::map<std::string, BlobStoreConfig, std::less<>> blob_config_;
  std::map<std::string, SqlStoreConfig, std::less<>> sql_config_;
  std::string sql_helper_;

  // Opened at construction, never changed after: read without a lock.
  std::map<std::string, std::unique_ptr<KvStore>, std::less<>> kv_;
  std::map<std::string, std::unique_ptr<QueueStore>, std::less<>> queue_;
  std::map<std::string, std::unique_ptr<BlobStore>, std::less<>> blob_ro_;
  std::map<std::string, std::unique_ptr<SqlStore>, std::less<>> sql_ro_;

  // Opened on first rw use; entries are added, never removed, so a pointer
  // handed out stays valid.
  std::mutex rw_mutex_;
  std::map<std::string, std::unique_ptr<BlobStore>, std::less<>> blob_rw_;
  std::map<std::string, std::unique_ptr<SqlStore>, std::less<>> sql_rw_;
  std::set<std::string, std::less<>> open_failure_logged_;  // "kind/name"
};

}  // namespace zn::broker
