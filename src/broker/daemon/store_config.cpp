#include "broker/daemon/store_config.h"

#include <arpa/inet.h>

#include <functional>
#include <limits>

#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

[[noreturn]] void refuse(const std::string& path, const std::string& message) {
  throw PolicyError(path, message);
}

bool valid_store_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

// One store's object: only `known` fields; each getter checks its type.
class Fields {
 public:
  Fields(const json& obj, std::string at, std::initializer_list<const char*> known)
      : obj_(obj), at_(std::move(at)) {
    if (!obj.is_object()) refuse(at_, "must be an object");
    for (const auto& [key, value] : obj.items()) {
      (void)value;
      bool ok = false;
      for (const char* k : known) ok = ok || key == k;
      if (!ok) refuse(at_ + "." + key, "unknown field");
    }
  }
  std::string path(const char* key, bool required) const {
    if (!obj_.contains(key)) {
      if (required) refuse(at_ + "." + key, "required");
      return {};
    }
    const json& v = obj_[key];
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().front() != '/')
      refuse(at_ + "." + key, "must be an absolute path");
    return v.get<std::string>();
  }
  uint64_t number(const char* key, uint64_t fallback, uint64_t min,
                  uint64_t max = std::numeric_limits<uint32_t>::max() * 1024ull) const {
    if (!obj_.contains(key)) return fallback;
    const json& v = obj_[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < min || v.get<uint64_t>() > max)
      refuse(at_ + "." + key,
             "must be an integer between " + std::to_string(min) + " and " + std::to_string(max));
    return v.get<uint64_t>();
  }
  bool flag(const char* key, bool fallback) const {
    if (!obj_.contains(key)) return fallback;
    if (!obj_[key].is_boolean()) refuse(at_ + "." + key, "must be true or false");
    return obj_[key].get<bool>();
  }

 private:
  const json& obj_;
  std::string at_;
};

// Each named store of one kind, parsed by `one`.
template <typename Config>
void parse_kind(const json& stores, const char* kind, std::map<std::string, Config>& out,
                const std::function<Config(const Fields&)>& one, std::initializer_list<const char*> known) {
  if (!stores.contains(kind)) return;
  const std::string at = std::string("$.stores.") + kind;
  const json& named = stores[kind];
  if (!named.is_object()) refuse(at, "must be an object of name -> store");
  for (const auto& [name, spec] : named.items()) {
    if (!valid_store_name(name)) refuse(at + "." + name, "store names are [a-z0-9_-], 1-64 characters");
    out[name] = one(Fields(spec, at + "." + name, known));
  }
}

}  // namespace

StoreCatalog parse_store_catalog(const json& stores, const std::string& state_dir) {
  StoreCatalog c;
  if (!stores.is_null()) {
    if (!stores.is_object())
      refuse("$.stores", "must be an object with \"kv\", \"blob\", \"sql\", \"queue\"");
    for (const auto& [kind, value] : stores.items()) {
      (void)value;
      if (kind != "kv" && kind != "blob" && kind != "sql" && kind != "queue")
        refuse("$.stores." + kind, "unknown kind (\"kv\", \"blob\", \"sql\" or \"queue\")");
    }
    parse_kind<KvStoreConfig>(stores, "kv", c.kv,
                              [](const Fields& f) {
                                KvStoreConfig k;
                                k.path = f.path("path", true);
                                k.quota.max_bytes = f.number("max_bytes", k.quota.max_bytes, 1);
                                k.quota.max_keys = f.number("max_keys", k.quota.max_keys, 1);
                                k.quota.max_value_bytes =
                                    f.number("max_value_bytes", k.quota.max_value_bytes, 1, 8u << 20);
                                return k;
                              },
                              {"path", "max_bytes", "max_keys", "max_value_bytes"});
    parse_kind<QueueStoreConfig>(stores, "queue", c.queue,
                                 [](const Fields& f) {
                                   QueueStoreConfig q;
                                   q.path = f.path("path", true);
                                   q.quota.max_bytes = f.number("max_bytes", q.quota.max_bytes, 1);
                                   q.quota.max_messages = f.number("max_messages", q.quota.max_messages, 1);
                                   q.quota.max_message_bytes =
                                       f.number("max_message_bytes", q.quota.max_message_bytes, 1, 8u << 20);
                                   return q;
                                 },
                                 {"path", "max_bytes", "max_messages", "max_message_bytes"});
    parse_kind<BlobStoreConfig>(stores, "blob", c.blob,
                                [](const Fields& f) {
                                  BlobStoreConfig b;
                                  b.directory = f.path("directory", true);
                                  b.quota_bytes = f.number("max_bytes", b.quota_bytes, 1);
                                  b.max_objects = f.number("max_objects", b.max_objects, 1);
                                  b.max_object_bytes =
                                      f.number("max_object_bytes", b.max_object_bytes, 1, 8u << 20);
                                  return b;
                                },
                                {"directory", "max_bytes", "max_objects", "max_object_bytes"});
    parse_kind<SqlStoreConfig>(
        stores, "sql", c.sql,
        [](const Fields& f) {
          SqlStoreConfig s;
          s.path = f.path("path", true);
          s.quota_bytes = f.number("max_bytes", s.quota_bytes, 0);
          s.create_if_missing = f.flag("create", s.create_if_missing);
          s.limits.max_rows = f.number("max_rows", s.limits.max_rows, 1, 1000000);
          s.limits.max_result_bytes = f.number("max_result_bytes", s.limits.max_result_bytes, 1, 64u << 20);
          s.limits.time_budget =
              std::chrono::milliseconds(f.number("time_budget_ms", s.limits.time_budget.count(), 1, 60000));
          s.limits.max_memory_bytes =
              f.number("max_memory_bytes", s.limits.max_memory_bytes, uint64_t{16} << 20, uint64_t{16} << 30);
          return s;
        },
        {"path", "max_bytes", "create", "max_rows", "max_result_bytes", "time_budget_ms",
         "max_memory_bytes"});
  }
  // A capability without "store" names "default": for KV and queues zerod
  // keeps one in its state directory unless the operator names another.
  if (!c.kv.count("default")) c.kv["default"].path = state_dir + "/resources/kv.db";
  if (!c.queue.count("default")) c.queue["default"].path = state_dir + "/resources/queue.db";
  return c;
}

std::vector<std::string> parse_capability_addresses(const json& addresses) {
  const std::string at = "$.capability_addresses";
  if (!addresses.is_array() || addresses.size() > 2)
    refuse(at, "must be an array of at most one IPv4 and one IPv6 address");
  std::vector<std::string> out;
  bool v4 = false, v6 = false;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const std::string path = at + "[" + std::to_string(i) + "]";
    if (!addresses[i].is_string()) refuse(path, "must be a string");
    const std::string text = addresses[i].get<std::string>();
    unsigned char buf[16];
    bool& seen = inet_pton(AF_INET, text.c_str(), buf) == 1 ? v4 : v6;
    if (&seen == &v6 && inet_pton(AF_INET6, text.c_str(), buf) != 1) refuse(path, "must be an IP address");
    if (seen) refuse(path, "one address per family");
    seen = true;
    out.push_back(text);
  }
  return out;
}

}  // namespace zn::broker
