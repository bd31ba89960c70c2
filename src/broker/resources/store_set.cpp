#include "broker/resources/store_set.h"

#include <sodium.h>

#include <array>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>

namespace zn::broker {

namespace {

BlobStoreOptions blob_options(const BlobStoreConfig& config, AccessMode mode) {
  BlobStoreOptions o;
  o.directory = config.directory;
  o.mode = mode;
  o.quota_bytes = config.quota_bytes;
  o.max_objects = config.max_objects;
  o.max_object_bytes = config.max_object_bytes;
  return o;
}

SqlStoreOptions sql_options(const SqlStoreConfig& config, AccessMode mode, const std::string& helper) {
  SqlStoreOptions o;
  o.helper = helper;
  o.path = config.path;
  o.mode = mode;
  o.create_if_missing = config.create_if_missing;
  o.quota_bytes = config.quota_bytes;
  o.limits = config.limits;
  return o;
}

std::unique_ptr<BlobStore> open_store(const BlobStoreConfig& config, AccessMode mode, const std::string&) {
  return std::make_unique<BlobStore>(blob_options(config, mode));
}

std::unique_ptr<SqlStore> open_store(const SqlStoreConfig& config, AccessMode mode,
                                     const std::string& helper) {
  return std::make_unique<SqlStore>(sql_options(config, mode, helper));
}

// `<kind> store "<name>": <problem>`, without the store's own "<kind> store: "
// prefix said twice.
std::runtime_error setup_error(std::string_view kind, const std::string& name, std::string_view problem) {
  const std::string own = std::string(kind) + " store: ";
  if (problem.starts_with(own)) problem.remove_prefix(own.size());
  return std::runtime_error(std::string(kind) + " store \"" + name + "\": " + std::string(problem));
}

// Opens one store, any setup exception renamed after the catalog entry.
template <typename Make>
auto open_or_throw(std::string_view kind, const std::string& name, Make make) {
  try {
    return make();
  } catch (const std::exception& e) {
    throw setup_error(kind, name, e.what());
  }
}

template <typename Map>
auto rekey(const Map& in) {
  std::map<std::string, typename Map::mapped_type, std::less<>> out;
  for (const auto& [name, config] : in) out.emplace(name, config);
  return out;
}

// What the guest is told for any store it cannot be served from: the
// reason (a path, an errno) is the operator's, logged.
StoreFailure unavailable() { return store_fail(StoreError::kInternal, "store unavailable"); }

std::string no_store(std::string_view kind, std::string_view name) {
  return "no " + std::string(kind) + " store \"" + std::string(name) + "\" in zerod's config";
}

// For the control plane, which may name the store.
StoreFailure not_configured(std::string_view kind, std::string_view name) {
  return store_fail(StoreError::kNotFound, no_store(kind, name));
}

}  // namespace

std::string capability_store_id(std::string_view handle) {
  // SHA-256 needs no sodium_init (it neither allocates guarded memory nor
  // draws randomness).
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(handle.data()), handle.size());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (size_t i = 0; i < 16; ++i) {
    id += kHex[digest[i] >> 4];
    id += kHex[digest[i] & 15];
  }
  return id;
}

StoreSet::StoreSet(const StoreCatalog& catalog)
    : kv_config_(rekey(catalog.kv)),
      queue_config_(rekey(catalog.queue)),
      blob_config_(rekey(catalog.blob)),
      sql_config_(rekey(catalog.sql)),
      sql_helper_(catalog.sql_helper) {
  for (const auto& [name, config] : kv_config_)
    kv_.emplace(name, open_or_throw("kv", name, [&] { return std::make_unique<KvStore>(config.path); }));
  for (const auto& [name, config] : queue_config_)
    queue_.emplace(name,
                   open_or_throw("queue", name, [&] { return std::make_unique<QueueStore>(config.path); }));
  for (const auto& [name, config] : blob_config_)
    blob_ro_.emplace(name, open_or_throw("blob", name, [&] {
                       return open_store(config, AccessMode::kReadOnly, sql_helper_);
                     }));
  for (const auto& [name, config] : sql_config_) {
    // A file zerod may create has to exist before it can be opened
    // read-only: its rw instance is opened (and the file made) now.
    if (config.create_if_missing)
      sql_rw_.emplace(name, open_or_throw("sql", name, [&] {
                        return open_store(config, AccessMode::kReadWrite, sql_helper_);
                      }));
    auto ro =
        open_or_throw("sql", name, [&] { return open_store(config, AccessMode::kReadOnly, sql_helper_); });
    // SQLite opens any file and reads it at the first statement: read the
    // header now, so a file that is not a database stops zerod here.
    auto probe = ro->execute("PRAGMA schema_version", nullptr);
    if (!probe.ok()) throw setup_error("sql", name, "cannot read the database: " + probe.message());
    sql_ro_.emplace(name, std::move(ro));
  }
}

StoreSet::~StoreSet() = default;

StoreResult<StoreSet::Kv> StoreSet::kv(std::string_view name) {
  auto store = kv_.find(name);
  if (store == kv_.end()) return unavailable();
  return Kv{store->second.get(), kv_config_.find(name)->second.quota};
}

StoreResult<StoreSet::Queue> StoreSet::queue(std::string_view name) {
  auto store = queue_.find(name);
  if (store == queue_.end()) return unavailable();
  return Queue{store->second.get(), queue_config_.find(name)->second.quota};
}

StoreResult<BlobStore*> StoreSet::blob(std::string_view name, AccessMode mode) {
  if (mode == AccessMode::kReadWrite) return read_write(blob_rw_, blob_config_, "blob", name);
  auto store = blob_ro_.find(name);
  if (store == blob_ro_.end()) return unavailable();
  return store->second.get();
}

StoreResult<SqlStore*> StoreSet::sql(std::string_view name, AccessMode mode) {
  if (mode == AccessMode::kReadWrite) return read_write(sql_rw_, sql_config_, "sql", name);
  auto store = sql_ro_.find(name);
  if (store == sql_ro_.end()) return unavailable();
  return store->second.get();
}

template <typename Store, typename Config>
StoreResult<Store*> StoreSet::read_write(std::map<std::string, std::unique_ptr<Store>, std::less<>>& opened,
                                         const std::map<std::string, Config, std::less<>>& configs,
                                         std::string_view kind, std::string_view name) {
  auto config = configs.find(name);
  if (config == configs.end()) return unavailable();
  {
    std::lock_guard lock(rw_mutex_);
    if (auto it = opened.find(name); it != opened.end()) return it->second.get();
  }
  // Opened outside the lock: a blob store sizes its whole directory, and
  // other stores' callers must not wait on that. Two first uses racing both
  // open; the first to insert wins and the other instance is closed unused.
  std::unique_ptr<Store> store;
  std::string why;
  try {
    store = open_store(config->second, AccessMode::kReadWrite, sql_helper_);
  } catch (const std::exception& e) {
    why = e.what();
  }
  std::lock_guard lock(rw_mutex_);
  if (!store) {
    // Logged once per store: the next use tries again (the operator may fix
    // the file meanwhile) but does not log again.
    if (open_failure_logged_.insert(std::string(kind) + "/" + std::string(name)).second)
      spdlog::error("resources: cannot open {} store \"{}\" for writing: {}", kind, name, why);
    return unavailable();
  }
  // try_emplace leaves a losing instance in `store`, closed after the lock.
  return opened.try_emplace(std::string(name), std::move(store)).first->second.get();
}

std::optional<std::string> StoreSet::missing(const Capability& cap) const {
  bool found = false;
  switch (cap.kind) {
    case CapabilityKind::kKv:
      found = kv_config_.contains(cap.store);
      break;
    case CapabilityKind::kBlob:
      found = blob_config_.contains(cap.store);
      break;
    case CapabilityKind::kSql:
      found = sql_config_.contains(cap.store);
      break;
    case CapabilityKind::kQueue:
      found = queue_config_.contains(cap.store);
      break;
  }
  if (found) return std::nullopt;
  return no_store(capability_kind_name(cap.kind), cap.store);
}

StoreStatus StoreSet::forget(CapabilityKind kind, std::string_view store_name, std::string_view cap_id) {
  switch (kind) {
    case CapabilityKind::kKv: {
      auto store = kv_.find(store_name);
      if (store == kv_.end()) return not_configured("kv", store_name);
      auto erased = store->second->erase_capability(cap_id);
      if (!erased.ok()) return erased.failure();
      return Done{};
    }
    case CapabilityKind::kQueue: {
      auto store = queue_.find(store_name);
      if (store == queue_.end()) return not_configured("queue", store_name);
      auto erased = store->second->erase_capability(cap_id);
      if (!erased.ok()) return erased.failure();
      return Done{};
    }
    case CapabilityKind::kBlob:
    case CapabilityKind::kSql:
      return Done{};
  }
  return Done{};
}

}  // namespace zn::broker
