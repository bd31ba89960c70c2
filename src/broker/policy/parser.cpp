#include "broker/policy/parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <map>
#include <memory_resource>
#include <optional>
#include <string_view>
#include <vector>

namespace zn::broker {
namespace {

// The document's tree lives in an arena for the length of one parse: a
// 10k-rule policy is ~70k small nodes, which malloc would hand out and then
// take back one by one (the take-back alone cost as much as the validation).
// nlohmann builds allocators by default construction, so the arena is
// reached through the thread's current scope.
thread_local std::pmr::memory_resource* t_arena = nullptr;

template <typename T>
struct ArenaAllocator {
  using value_type = T;
  ArenaAllocator() = default;
  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& /*other*/) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(resource()->allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) noexcept { resource()->deallocate(p, n * sizeof(T), alignof(T)); }
  friend bool operator==(ArenaAllocator /*a*/, ArenaAllocator /*b*/) { return true; }

 private:
  static std::pmr::memory_resource* resource() { return t_arena ? t_arena : std::pmr::new_delete_resource(); }
};

// Every tree of the json type below must be built and destroyed inside one.
class ArenaScope {
 public:
  explicit ArenaScope(std::pmr::memory_resource* arena) : previous_(t_arena) { t_arena = arena; }
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;
  ~ArenaScope() { t_arena = previous_; }

 private:
  std::pmr::memory_resource* previous_;
};

using json = nlohmann::basic_json<std::map, std::vector, std::string, bool, std::int64_t, std::uint64_t,
                                  double, ArenaAllocator>;

constexpr std::array<std::string_view, 7> kKnownMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                           "PATCH", "DELETE", "OPTIONS"};

// Where a value sits in the document ("$.policy.allow[2].host"). Only
// linked, never formatted, until an error is reported: a large policy
// validates without building a path string per field.
class Path {
 public:
  static Path root() { return Path(nullptr, {}, 0); }
  // The key must outlive the Path (a literal or a key of the document).
  Path operator/(std::string_view key) const { return Path(this, key, 0); }
  Path operator[](size_t index) const { return Path(this, {}, index); }

  std::string str() const {
    if (!parent_) return "$";
    std::string parent = parent_->str();
    if (key_.data()) return parent + "." + std::string(key_);
    return parent + "[" + std::to_string(index_) + "]";
  }

 private:
  Path(const Path* parent, std::string_view key, size_t index) : parent_(parent), key_(key), index_(index) {}
  const Path* parent_;
  std::string_view key_;  // data() null: an array element
  size_t index_;
};

[[noreturn]] void fail(const Path& path, const std::string& message) {
  throw PolicyError(path.str(), message);
}

// An object's known fields, looked up in one pass over its members: each
// entry points at the value of known[i], or is null if absent. Unknown fields
// are refused so a typo ("method" for "methods") never silently widens or
// narrows a rule; the first in key order is reported.
template <size_t N>
std::array<const json*, N> only_fields(const json& obj, const Path& path,
                                       const std::array<std::string_view, N>& known) {
  if (!obj.is_object()) fail(path, "must be an object");
  std::array<const json*, N> found{};
  for (const auto& [key, value] : obj.get_ref<const json::object_t&>()) {
    size_t i = 0;
    while (i < N && key != known[i]) ++i;
    if (i == N) fail(path / key, "unknown field");
    found[i] = &value;
  }
  return found;
}

const std::string& as_string(const json& v, const Path& path) {
  if (!v.is_string()) fail(path, "must be a string");
  return v.get_ref<const std::string&>();
}

const json::array_t& as_array(const json& v, const Path& path, size_t max) {
  if (!v.is_array()) fail(path, "must be an array");
  if (v.size() > max) fail(path, "more than " + std::to_string(max) + " entries");
  return v.get_ref<const json::array_t&>();
}

uint64_t as_uint(const json& v, const Path& path, uint64_t min, uint64_t max) {
  if (!v.is_number_integer()) fail(path, "must be an integer");
  const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  const uint64_t n = negative ? 0 : v.get<uint64_t>();
  if (negative || n < min || n > max)
    fail(path, "must be between " + std::to_string(min) + " and " + std::to_string(max));
  return n;
}

HostPattern parse_host(const json& v, const Path& path) {
  std::string why;
  auto host = parse_host_pattern(as_string(v, path), &why);
  if (!host) fail(path, why);
  return std::move(*host);
}

bool iequals_ascii(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
           return lower(x) == lower(y);
         });
}

bool valid_resource_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

constexpr std::array<std::string_view, 9> kAllowFields = {"host", "methods", "paths",  "identity", "action",
                                                          "port", "proto",   "inject", "websocket"};
enum AllowField { kHost, kMethods, kPaths, kIdentity, kAction, kPort, kProto, kInject, kWebSocket };

// A header an identity may be injected as: a token (RFC 9110 5.1), and none
// of the headers that frame or route the request or that the proxy owns.
bool injectable_header(std::string_view name) {
  static constexpr std::array<std::string_view, 13> kRefused = {
      "host",   "content-length",  "transfer-encoding", "connection", "keep-alive",
      "te",     "trailer",         "upgrade",           "expect",     "proxy-connection",
      "cookie", "accept-encoding", "content-type"};
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return std::find(kRefused.begin(), kRefused.end(), lower) == kRefused.end();
}

// A query parameter name: unreserved characters only, so it is the same
// spelled raw or percent-encoded.
bool valid_query_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// Printable ASCII (space allowed inside).
bool printable(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

// What can sit in a header value (RFC 9110 5.5: visible ASCII, space, tab,
// obs-text): never CR, LF, NUL or another control, which would split the
// forwarded head.
bool header_safe(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) {
    const auto b = static_cast<unsigned char>(c);
    return b == '\t' || (b >= 0x20 && b != 0x7f);
  });
}

// "inject": {"header": NAME, "prefix": TEXT} or {"query": NAME}. Checked
// against the resource's kind once resources are known.
Placement parse_placement(const json& v, const Path& path) {
  const auto field = only_fields(v, path, std::array<std::string_view, 3>{"header", "prefix", "query"});
  Placement p;
  if (field[2]) {
    if (field[0] || field[1]) fail(path / "query", "\"query\" excludes \"header\" and \"prefix\"");
    const std::string& name = as_string(*field[2], path / "query");
    if (!valid_query_name(name)) fail(path / "query", "a parameter name is [A-Za-z0-9_.-], 1-64 characters");
    p.kind = Placement::Kind::kQuery;
    p.name = name;
    p.prefix.clear();
    return p;
  }
  if (field[0]) {
    const std::string& name = as_string(*field[0], path / "header");
    if (!injectable_header(name))
      fail(path / "header", "must be a header name, not one that frames or routes the request");
    p.name = name;
    // "Bearer " belongs to Authorization; another header carries the bare
    // credential unless a prefix says otherwise.
    if (!iequals_ascii(name, "authorization")) p.prefix.clear();
  }
  if (field[1]) {
    const std::string& prefix = as_string(*field[1], path / "prefix");
    if (prefix.size() > 64 || !printable(prefix))
      fail(path / "prefix", "printable ASCII, at most 64 characters");
    p.prefix = prefix;
  }
  if (!field[0] && !field[1]) fail(path, "needs \"header\" or \"query\"");
  return p;
}

AllowRule parse_allow(const json& r, const Path& path, size_t index, const PolicyLimits& limits) {
  const auto field = only_fields(r, path, kAllowFields);
  AllowRule rule;
  rule.index = index;
  const Path host_path = path / "host";
  if (!field[kHost]) fail(host_path, "required");
  rule.host = parse_host(*field[kHost], host_path);
  if (field[kMethods]) {
    const Path mpath = path / "methods";
    const auto& methods = as_array(*field[kMethods], mpath, limits.max_methods);
    if (methods.empty()) fail(mpath, "must not be empty (omit it to allow any method)");
    rule.methods.reserve(methods.size());
    for (size_t i = 0; i < methods.size(); ++i) {
      const std::string& m = as_string(methods[i], mpath[i]);
      if (std::find(kKnownMethods.begin(), kKnownMethods.end(), m) == kKnownMethods.end())
        fail(mpath[i], "unknown or unsupported method '" + m + "'");
      if (std::find(rule.methods.begin(), rule.methods.end(), m) != rule.methods.end())
        fail(mpath[i], "duplicate method");
      rule.methods.push_back(m);
    }
  }
  if (field[kPaths]) {
    const Path ppath = path / "paths";
    const auto& paths = as_array(*field[kPaths], ppath, limits.max_paths_per_rule);
    if (paths.empty()) fail(ppath, "must not be empty (omit it to allow any path)");
    rule.paths.reserve(paths.size());
    for (size_t i = 0; i < paths.size(); ++i) {
      std::string why;
      auto p = PathPattern::parse(as_string(paths[i], ppath[i]), &why);
      if (!p) fail(ppath[i], why);
      rule.paths.push_back(std::move(*p));
    }
  }
  if (field[kIdentity]) {
    const Path ipath = path / "identity";
    const std::string_view id = as_string(*field[kIdentity], ipath);
    if (id == "jwt")
      rule.mint_jwt = true;
    else if (id.rfind("cap:", 0) != 0 || !valid_resource_name(id.substr(4)))
      fail(ipath, "must be \"cap:<resource>\" or \"jwt\"");
    else
      rule.identity = std::string(id.substr(4));
  }
  if (field[kInject]) {
    if (!field[kIdentity]) fail(path / "inject", "needs an identity");
    rule.placement = parse_placement(*field[kInject], path / "inject");
  }
  if (field[kAction]) {
    const Path apath = path / "action";
    const std::string& a = as_string(*field[kAction], apath);
    if (a == "allow")
      rule.action = RuleAction::kAllow;
    else if (a == "ask")
      rule.action = RuleAction::kAsk;
    else
      fail(apath, "must be \"allow\" or \"ask\"");
  }
  if (field[kWebSocket]) {
    const Path wpath = path / "websocket";
    if (!field[kWebSocket]->is_boolean()) fail(wpath, "must be true or false");
    rule.websocket = field[kWebSocket]->get<bool>();
    // A WebSocket opens with a GET: a rule that allows no GET could never
    // allow one.
    if (rule.websocket && !rule.methods.empty() &&
        std::find(rule.methods.begin(), rule.methods.end(), "GET") == rule.methods.end())
      fail(wpath, "a WebSocket opens with GET, which \"methods\" does not allow");
  }
  if (field[kProto]) {
    const Path ppath = path / "proto";
    if (as_string(*field[kProto], ppath) != "tcp") fail(ppath, "only \"tcp\" is supported");
    if (!field[kPort]) fail(path / "port", "required with proto");
  }
  if (field[kPort]) {
    rule.port = static_cast<uint16_t>(as_uint(*field[kPort], path / "port", 1, 65535));
    if (rule.needs_interception())
      fail(path, "an L4 rule (port/proto) cannot have methods, paths, identity, ask or websocket");
    if (rule.host.kind == HostPattern::Kind::kWildcard)
      fail(host_path, "an L4 rule needs a name or an address, not a wildcard");
  } else if (rule.host.kind == HostPattern::Kind::kAddress && rule.host.name.find('/') != std::string::npos) {
    fail(host_path, "a CIDR is only allowed in an L4 rule (with port)");
  }
  return rule;
}

// json::parse's own DOM building, plus a refusal of duplicate keys: they are
// ambiguous (which "host" wins?). Checked on the object being filled, so it
// costs one map insert per key like the plain parse. (json::parse with a
// callback is not used: its parser rescans the parent array at every
// object's end, quadratic in the number of rules.)
class DocumentBuilder {
 public:
  explicit DocumentBuilder(json& root) : root_(root) {}
  // The first duplicate key in document order (it may be ""). Parsing goes
  // on past it so that a later syntax error is still reported first.
  const std::optional<std::string>& duplicate() const { return duplicate_; }

  bool null() { return add(nullptr); }
  bool boolean(bool v) { return add(v); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return add(v); }
  bool string(json::string_t& v) { return add(std::move(v)); }
  bool binary(json::binary_t& v) { return add(json::binary(std::move(v))); }
  bool start_object(std::size_t /*len: unknown for JSON text*/) {
    open_.push_back(place(json(json::value_t::object)));
    return true;
  }
  bool key(json::string_t& k) {
    auto& object = open_.back()->get_ref<json::object_t&>();
    auto it = object.lower_bound(k);
    if (it != object.end() && it->first == k) {
      if (!duplicate_) duplicate_ = k;  // the later value wins, as in json::parse; the document fails anyway
    } else {
      it = object.emplace_hint(it, std::move(k), nullptr);
    }
    member_ = &it->second;
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*len*/) {
    open_.push_back(place(json(json::value_t::array)));
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  template <class Exception>
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const Exception& e) {
    throw e;  // as json::parse does: parse_error, or out_of_range for a huge number
  }

 private:
  // Values are linked into their parent in place, as json::parse does; with
  // JSON_DIAGNOSTICS the parent pointers would need setting too.
  static_assert(!JSON_DIAGNOSTICS, "DocumentBuilder does not set parent pointers");

  json* place(json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    if (open_.back()->is_array()) {
      auto& array = open_.back()->get_ref<json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  template <class T>
  bool add(T&& v) {
    place(json(std::forward<T>(v)));
    return true;
  }

  json& root_;
  std::vector<json*> open_;  // the containers being filled, innermost last
  json* member_ = nullptr;   // the object member the next value fills
  std::optional<std::string> duplicate_;
};

// One resource: its kind, its typed secret fields (each made by `read`, so
// a sealed value is opened here), its placeholder's variable name.
Resource parse_resource(const std::string& name, const json& fields, const Path& npath,
                        const SecretReader& read, const PolicyLimits& limits) {
  if (!fields.is_object()) fail(npath, "must be an object of strings");
  if (fields.size() > limits.max_resource_fields) fail(npath, "too many fields");
  Resource resource;
  const auto& members = fields.get_ref<const json::object_t&>();
  if (auto kind = members.find("kind"); kind != members.end()) {
    const std::string& k = as_string(kind->second, npath / "kind");
    if (k == "token")
      resource.kind = ResourceKind::kToken;
    else if (k == "basic")
      resource.kind = ResourceKind::kBasic;
    else
      fail(npath / "kind", "must be \"token\" or \"basic\" (omit it for free-form fields)");
  }
  for (const auto& [key, value] : members) {
    if (key == "kind") continue;
    if (key == "placeholder") {
      const std::string& env = as_string(value, npath / key);
      const bool ok = !env.empty() && env.size() <= 64 && !(env[0] >= '0' && env[0] <= '9') &&
                      std::all_of(env.begin(), env.end(), [](char c) {
                        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
                      });
      if (!ok) fail(npath / key, "an environment variable name: [A-Z_][A-Z0-9_]*, at most 64 characters");
      resource.placeholder_env = env;
      continue;
    }
    // A typed resource has exactly its kind's fields: a typo never leaves
    // the credential unset while the rule still looks complete.
    const bool known = resource.kind == ResourceKind::kLegacy ||
                       (resource.kind == ResourceKind::kToken && key == "token") ||
                       (resource.kind == ResourceKind::kBasic && (key == "user" || key == "password"));
    if (!known)
      fail(npath / key, resource.kind == ResourceKind::kToken
                            ? "unknown field (a token resource has \"token\")"
                            : "unknown field (a basic resource has \"user\" "
                              "and \"password\")");
    // Never echo a secret in an error: name the field only.
    if (!value.is_string()) fail(npath / key, "must be a string");
    const std::string& text = value.get_ref<const std::string&>();
    // Room for a sealed envelope's header, nonce, tag and base64.
    if (text.size() > limits.max_secret_bytes * 4 / 3 + 128) fail(npath / key, "too long");
    Secret secret;
    try {
      secret = read(name, key, text);
    } catch (const std::runtime_error& e) {
      fail(npath / key, e.what());
    }
    if (secret.size() > limits.max_secret_bytes) fail(npath / key, "too long");
    if (resource.kind != ResourceKind::kLegacy) {
      if (secret.size() == 0) fail(npath / key, "must not be empty");
      // Goes into a header or a query as it is (basic: base64'd, any byte
      // but ':' in the user).
      const bool is_user = key == "user";  // a structured binding: not capturable before C++20's clang 16
      const bool fits = secret.reveal([&](std::string_view v) {
        if (resource.kind == ResourceKind::kBasic) return !is_user || v.find(':') == std::string_view::npos;
        return header_safe(v);
      });
      if (!fits)
        fail(npath / key, resource.kind == ResourceKind::kBasic ? "a user name cannot contain ':'"
                                                                : "must not contain control characters");
    }
    resource.fields.emplace(key, std::move(secret));
  }
  const char* required[2] = {resource.kind == ResourceKind::kBasic ? "user" : "token",
                             resource.kind == ResourceKind::kBasic ? "password" : nullptr};
  if (resource.kind != ResourceKind::kLegacy)
    for (const char* r : required)
      if (r && !resource.fields.count(r)) fail(npath / r, "required");
  if (resource.placeholder_env && !resource.credential())
    fail(npath / "placeholder", "the resource has no credential to stand in for");
  return resource;
}

// One capability: its kind, its mode, the operator's name for its store.
Capability parse_capability(const json& spec, const Path& path) {
  const auto field = only_fields(spec, path, std::array<std::string_view, 4>{"kind", "mode", "store", "db"});
  Capability cap;
  if (!field[0]) fail(path / "kind", "required");
  const std::string& kind = as_string(*field[0], path / "kind");
  if (kind == "kv")
    cap.kind = CapabilityKind::kKv;
  else if (kind == "blob")
    cap.kind = CapabilityKind::kBlob;
  else if (kind == "sql")
    cap.kind = CapabilityKind::kSql;
  else if (kind == "queue")
    cap.kind = CapabilityKind::kQueue;
  else
    fail(path / "kind", "must be \"kv\", \"blob\", \"sql\" or \"queue\"");
  // Without "mode", read-only: writing is granted, never assumed (a queue
  // is only worth having to send to and take from).
  cap.read_only = cap.kind != CapabilityKind::kQueue;
  if (field[1]) {
    const std::string& mode = as_string(*field[1], path / "mode");
    if (mode != "ro" && mode != "rw") fail(path / "mode", "must be \"ro\" or \"rw\"");
    cap.read_only = mode == "ro";
    if (cap.read_only && cap.kind == CapabilityKind::kQueue) fail(path / "mode", "a queue is \"rw\" only");
  }
  // "db" is the sql spelling of "store": one of them, and "db" only for sql.
  if (field[3] && cap.kind != CapabilityKind::kSql)
    fail(path / "db", "only for \"kind\": \"sql\" (use \"store\")");
  if (field[2] && field[3]) fail(path / "db", "\"db\" and \"store\" name the same thing: give one");
  if (const json* store = field[3] ? field[3] : field[2]) {
    const Path spath = path / (field[3] ? "db" : "store");
    cap.store = as_string(*store, spath);
    if (!valid_resource_name(cap.store))
      fail(spath, "names a store of zerod's config: [a-z0-9_-], 1-64 characters");
  }
  return cap;
}

// A rule's identity names a resource that has a credential, placed where
// that kind of credential can go.
void check_identity(const AllowRule& rule, const std::map<std::string, Resource>& resources, const Path& path,
                    const json& doc) {
  const Path ipath = path / "identity";
  auto it = resources.find(*rule.identity);
  if (it == resources.end()) fail(ipath, "no resource '" + *rule.identity + "'");
  const Resource& r = it->second;
  if (!r.credential())
    fail(ipath, "resource '" + *rule.identity + "' has no " +
                    (r.kind == ResourceKind::kLegacy ? "accessToken" : "credential"));
  if (r.kind == ResourceKind::kLegacy) {
    const bool fits = r.credential()->reveal([](std::string_view v) { return header_safe(v); });
    if (!fits)
      fail(ipath, "resource '" + *rule.identity + "': accessToken must not contain control characters");
  }
  if (r.kind == ResourceKind::kBasic && doc.contains("inject")) {
    const json& inject = doc["inject"];
    if (inject.contains("query") || inject.contains("prefix"))
      fail(path / "inject", "a basic resource goes as \"Authorization: Basic\" (only \"header\" may change)");
  }
}

Policy parse_document(const json& doc, const SecretReader& read, const PolicyLimits& limits) {
  const Path root = Path::root();
  const auto top =
      only_fields(doc, root, std::array<std::string_view, 4>{"policy", "resources", "canaries", "caps"});
  const Path ppath = root / "policy";
  if (!top[0]) fail(ppath, "required");
  const auto field =
      only_fields(*top[0], ppath, std::array<std::string_view, 4>{"default", "allow", "deny", "rate"});
  const json *default_action = field[0], *allow = field[1], *deny = field[2], *rate = field[3];

  Policy policy;
  if (default_action && as_string(*default_action, ppath / "default") != "deny")
    fail(ppath / "default", "only \"deny\" is supported");
  if (const json* res = top[1]) {
    const Path rpath = root / "resources";
    if (!res->is_object()) fail(rpath, "must be an object");
    if (res->size() > limits.max_resources) fail(rpath, "too many resources");
    for (const auto& [name, fields] : res->get_ref<const json::object_t&>()) {
      const Path npath = rpath / name;
      if (!valid_resource_name(name)) fail(npath, "resource names are [a-z0-9_-], 1-64 characters");
      policy.resources[name] = parse_resource(name, fields, npath, read, limits);
    }
  }
  if (const json* caps = top[3]) {
    const Path cpath = root / "caps";
    if (!caps->is_object()) fail(cpath, "must be an object");
    if (caps->size() > limits.max_caps)
      fail(cpath, "more than " + std::to_string(limits.max_caps) + " capabilities");
    for (const auto& [name, spec] : caps->get_ref<const json::object_t&>()) {
      const Path npath = cpath / name;
      if (!valid_resource_name(name)) fail(npath, "capability names are [a-z0-9_-], 1-64 characters");
      policy.caps[name] = parse_capability(spec, npath);
    }
  }
  if (const json* canaries = top[2]) {
    const Path cpath = root / "canaries";
    const auto& list = as_array(*canaries, cpath, limits.max_canaries);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string& c = as_string(list[i], cpath[i]);
      // Long enough not to match ordinary traffic; printable so it can sit
      // in a header, a name or a body as planted.
      if (c.size() < 8 || c.size() > 256 || !printable(c) || c.find(' ') != std::string::npos)
        fail(cpath[i], "a canary is 8-256 printable ASCII characters without spaces");
      if (std::find(policy.canaries.begin(), policy.canaries.end(), c) != policy.canaries.end())
        fail(cpath[i], "duplicate canary");
      policy.canaries.push_back(c);
    }
  }
  if (allow) {
    const Path apath = ppath / "allow";
    const auto& rules = as_array(*allow, apath, limits.max_allow_rules);
    policy.allow.reserve(rules.size());
    for (size_t i = 0; i < rules.size(); ++i) {
      AllowRule rule = parse_allow(rules[i], apath[i], i, limits);
      if (rule.identity) check_identity(rule, policy.resources, apath[i], rules[i]);
      policy.allow.push_back(std::move(rule));
    }
  }
  if (deny) {
    const Path dpath = ppath / "deny";
    const auto& rules = as_array(*deny, dpath, limits.max_deny_rules);
    policy.deny.reserve(rules.size());
    for (size_t i = 0; i < rules.size(); ++i) {
      const Path rule = dpath[i];
      const auto host = only_fields(rules[i], rule, std::array<std::string_view, 1>{"host"});
      if (!host[0]) fail(rule / "host", "required");
      policy.deny.push_back({i, parse_host(*host[0], rule / "host")});
    }
  }
  if (rate) {
    const Path rpath = ppath / "rate";
    const auto field = only_fields(*rate, rpath, std::array<std::string_view, 2>{"burst", "per_second"});
    if (!field[0]) fail(rpath / "burst", "required");
    if (!field[1]) fail(rpath / "per_second", "required");
    policy.rate =
        RateLimit{static_cast<uint32_t>(as_uint(*field[0], rpath / "burst", 1, limits.max_rate)),
                  static_cast<uint32_t>(as_uint(*field[1], rpath / "per_second", 1, limits.max_rate))};
  }
  return policy;
}

}  // namespace

Policy parse_policy(std::string_view text, const PolicyLimits& limits) {
  return parse_policy(
      text, [](const std::string&, const std::string&, const std::string& value) { return Secret(value); },
      limits);
}

Policy parse_policy(std::string_view text, const SecretReader& read, const PolicyLimits& limits) {
  if (text.size() > limits.max_document_bytes) fail(Path::root(), "document larger than the limit");
  std::pmr::monotonic_buffer_resource arena;
  const ArenaScope scope(&arena);
  json doc;  // destroyed before the scope ends and the arena goes
  DocumentBuilder builder(doc);
  try {
    json::sax_parse(text.begin(), text.end(), &builder);
  } catch (const json::parse_error& e) {
    fail(Path::root(), "invalid JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {
    // e.g. a number too large for any type (found by the policy fuzzer)
    fail(Path::root(), "invalid JSON: " + std::string(e.what()));
  }
  if (const auto& duplicate = builder.duplicate()) fail(Path::root(), "duplicate key '" + *duplicate + "'");
  try {
    return parse_document(doc, read, limits);
  } catch (const json::exception& e) {
    fail(Path::root(), std::string("invalid document: ") + e.what());  // every field is type-checked first
  }
}

}  // namespace zn::broker
