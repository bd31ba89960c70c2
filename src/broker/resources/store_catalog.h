// The backing stores zerod's operator names in its config ("stores"), by
// kind and name. A session's policy names a store ("store", "db") and never
// a path: these are the only files and directories a capability can reach.
// Plain data; daemon/config parses it, StoreSet opens it.
#pragma once

#include <map>
#include <string>

#include "broker/resources/kv_store.h"
#include "broker/resources/queue_store.h"
#include "broker/resources/sql_store.h"

namespace zn::broker {

// One shared SQLite file; every capability on it has its own namespace and
// this quota.
struct KvStoreConfig {
  std::string path;
  KvQuota quota;  // per capability
};

struct QueueStoreConfig {
  std::string path;
  QueueQuota quota;  // per capability
};

// An operator's directory, shared by every capability naming it (a dataset
// read by many sessions, or a drop box for results).
struct BlobStoreConfig {
  std::string directory;
  uint64_t quota_bytes = 1024ull * 1024 * 1024;
  uint64_t max_objects = 100000;
  size_t max_object_bytes = 8 * 1024 * 1024;  // also bounded by the proxy's request body limit
};

// An operator's SQLite database, shared by every capability naming it.
struct SqlStoreConfig {
  std::string path;
  uint64_t quota_bytes = 0;  // rw: the file's maximum size; 0: none
  bool create_if_missing = false;
  SqlLimits limits;
};

struct StoreCatalog {
  std::map<std::string, KvStoreConfig> kv;
  std::map<std::string, BlobStoreConfig> blob;
  std::map<std::string, SqlStoreConfig> sql;
  std::map<std::string, QueueStoreConfig> queue;
  // The zn-sql-call executable every SQL call runs in (sql_store.h): zerod
  // finds it beside itself; needed only when there is a SQL store.
  std::string sql_helper;
};

}  // namespace zn::broker
