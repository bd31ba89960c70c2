#include "broker/resources/gateway.h"

#include <chrono>
#include <exception>
#include <utility>

#include "broker/resources/base64.h"
#include "broker/resources/utf8.h"

namespace zn::broker {

namespace {

using nlohmann::json;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kBytes = "application/octet-stream";
constexpr std::string_view kRead = "resource:read";
constexpr std::string_view kWrite = "resource:write";
constexpr std::string_view kDeny = "resource:deny";

static_assert(std::chrono::seconds(ResourceGateway::kMaxVisibilitySeconds) == QueueStore::kMaxVisibility);

int status_of(StoreError e) {
  switch (e) {
    case StoreError::kNotFound:
      return 404;
    case StoreError::kReadOnly:
    case StoreError::kForbidden:
      return 403;
    case StoreError::kQuotaExceeded:
      return 507;
    case StoreError::kTooLarge:
      return 413;
    case StoreError::kBadRequest:
      return 400;
    case StoreError::kLimitExceeded:
      return 422;
    case StoreError::kInternal:
      return 500;
  }
  return 500;
}

GatewayResponse reply(int status, std::string_view content_type, std::string body, std::string_view event) {
  GatewayResponse r;
  r.status = status;
  r.content_type = std::string(content_type);
  r.body = std::move(body);
  r.event = std::string(event);
  r.detail = json::object();
  return r;
}

GatewayResponse json_reply(const json& body, std::string_view event) {
  return reply(200, kJson, body.dump(), event);
}

GatewayResponse no_content(std::string_view event) { return reply(204, "", "", event); }

GatewayResponse failure(int status, std::string_view code, std::string_view message) {
  GatewayResponse r = reply(status, kJson, gateway_error_body(code, message), kDeny);
  r.detail["code"] = code;
  return r;
}

// The one 404 of the gateway: a route that does not exist, a handle that
// does not resolve (malformed, unknown, another session's, another kind's)
// and a key, object or delivery that is not there all read the same to the
// guest. Only the audit's reason differs.
GatewayResponse not_found(std::string_view reason) {
  GatewayResponse r = failure(404, "not_found", "not found");
  r.detail["reason"] = reason;
  return r;
}

GatewayResponse store_failure(const StoreFailure& f) {
  if (f.code == StoreError::kNotFound) return not_found("missing");
  return failure(status_of(f.code), to_string(f.code), f.message);
}

GatewayResponse bad_request(std::string_view message) { return failure(400, "bad_request", message); }

GatewayResponse read_only() { return failure(403, "read_only", "read-only capability"); }

// Bytes as JSON: a string when they are UTF-8, else {"base64": ...}, as SQL
// rows carry blobs.
json bytes_json(const std::string& bytes) {
  if (valid_utf8(bytes)) return bytes;
  return json{{"base64", base64_encode(bytes)}};
}

// A JSON object body, nullopt when the body is anything else. Never throws.
std::optional<json> json_object(const std::string& body) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return std::nullopt;
  return doc;
}

// Whether every member of `doc` is one of `allowed`: a misspelt field is an
// error rather than a default silently used.
bool only_members(const json& doc, std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : doc.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || name == a;
    if (!known) return false;
  }
  return true;
}

AccessMode mode_of(const BoundCapability& cap) {
  return cap.capability.read_only ? AccessMode::kReadOnly : AccessMode::kReadWrite;
}

// The op a method is on a route, or nullptr (405).
const char* op_of(CapabilityKind kind, std::string_view method, QueueOp queue_op) {
  switch (kind) {
    case CapabilityKind::kKv:
      if (method == "GET") return "get";
      if (method == "PUT") return "put";
      if (method == "DELETE") return "delete";
      return nullptr;
    case CapabilityKind::kBlob:
      if (method == "GET") return "get";
      if (method == "PUT") return "put";
      return nullptr;
    case CapabilityKind::kSql:
      return method == "POST" ? "query" : nullptr;
    case CapabilityKind::kQueue:
      if (method != "POST") return nullptr;
      switch (queue_op) {
        case QueueOp::kSend:
          return "send";
        case QueueOp::kReceive:
          return "receive";
        case QueueOp::kAck:
          return "ack";
      }
      return nullptr;
  }
  return nullptr;
}

std::string_view allowed_methods(CapabilityKind kind) {
  switch (kind) {
    case CapabilityKind::kKv:
      return "GET, PUT or DELETE";
    case CapabilityKind::kBlob:
      return "GET or PUT";
    case CapabilityKind::kSql:
    case CapabilityKind::kQueue:
      return "POST";
  }
  return "POST";
}

}  // namespace

std::string gateway_error_body(std::string_view code, std::string_view message) {
  return json{{"error", {{"code", code}, {"message", message}}}}.dump();
}

ResourceGateway::ResourceGateway(StoreSet& stores) : stores_(stores) {}

GatewayResponse ResourceGateway::serve(const GatewayRequest& request, const HandleLookup& find) {
  json detail = json::object();
  GatewayResponse out;
  try {
    out = route(request, find, detail);
  } catch (const std::exception&) {
    // Nothing below throws on the guest's input (parsers return values, the
    // stores return errors); this is the last line should a JSON dump or an
    // allocation fail, so the worker answers rather than dies.
    out = failure(500, "internal", "internal error");
  }
  for (auto& [name, value] : out.detail.items()) detail[name] = value;
  detail["status"] = out.status;
  detail["bytes_in"] = request.body.size();
  detail["bytes_out"] = out.body.size();
  out.detail = std::move(detail);
  return out;
}

GatewayResponse ResourceGateway::route(const GatewayRequest& request, const HandleLookup& find,
                                       json& detail) {
  // 1. The shape, from the target alone.
  const GatewayRoute where = parse_gateway_route(request.target);
  if (where.kind) detail["kind"] = capability_kind_name(*where.kind);
  if (!where.matched) return not_found("no route");
  // 2. The handle. Its shape is public (cap_handles.h), so refusing a
  // malformed one unlooked-up tells nothing; the lookup is the caller's.
  if (!well_formed_handle(where.handle)) return not_found("malformed handle");
  const std::optional<BoundCapability> cap = find(where.handle);
  if (!cap) return not_found("unknown handle");
  detail["cap"] = cap->name;
  if (cap->capability.kind != *where.kind) return not_found("wrong kind");
  // 3. Only now, to the capability's holder: the method, the mode, the input.
  const char* op = op_of(*where.kind, request.method, where.queue_op);
  if (!op)
    return failure(405, "method_not_allowed",
                   "method not allowed here; use " + std::string(allowed_methods(*where.kind)));
  detail["op"] = op;
  const std::string_view op_name = op;
  const bool writes = *where.kind == CapabilityKind::kQueue || op_name == "put" || op_name == "delete";
  if (cap->capability.read_only && writes) return read_only();

  switch (*where.kind) {
    case CapabilityKind::kKv:
    case CapabilityKind::kBlob: {
      const std::optional<std::string> name = percent_decode_path(where.rest);
      const bool is_kv = *where.kind == CapabilityKind::kKv;
      if (!name)
        return bad_request(is_kv ? "malformed percent-encoding in the key"
                                 : "malformed percent-encoding in the path");
      return is_kv ? kv(request, *cap, *name) : blob(request, *cap, *name);
    }
    case CapabilityKind::kSql:
      return sql(request, *cap);
    case CapabilityKind::kQueue:
      return queue(request, *cap, where.queue_op);
  }
  return not_found("no route");
}

GatewayResponse ResourceGateway::kv(const GatewayRequest& request, const BoundCapability& cap,
                                    const std::string& key) {
  auto store = stores_.kv(cap.capability.store);
  if (!store.ok()) return store_failure(store.failure());
  const KvCapability kc{cap.store_id, mode_of(cap), store.value().quota};
  KvStore& kv = *store.value().store;
  if (request.method == "GET") {
    auto value = kv.get(kc, key);
    if (!value.ok()) return store_failure(value.failure());
    return reply(200, kBytes, std::move(value).value(), kRead);
  }
  const StoreStatus done = request.method == "PUT" ? kv.put(kc, key, request.body) : kv.erase(kc, key);
  if (!done.ok()) return store_failure(done.failure());
  return no_content(kWrite);
}

GatewayResponse ResourceGateway::blob(const GatewayRequest& request, const BoundCapability& cap,
                                      const std::string& path) {
  auto store = stores_.blob(cap.capability.store, mode_of(cap));
  if (!store.ok()) return store_failure(store.failure());
  BlobStore& blobs = *store.value();
  if (request.method == "GET") {
    auto object = blobs.get(path);
    if (!object.ok()) return store_failure(object.failure());
    return reply(200, kBytes, std::move(object).value(), kRead);
  }
  const StoreStatus done = blobs.put(path, request.body);
  if (!done.ok()) return store_failure(done.failure());
  return no_content(kWrite);
}

GatewayResponse ResourceGateway::sql(const GatewayRequest& request, const BoundCapability& cap) {
  const std::optional<json> doc = json_object(request.body);
  if (!doc) return bad_request("the body is a JSON object: {\"sql\": \"...\", \"params\": [...] or {...}}");
  if (!only_members(*doc, {"sql", "params"}))
    return bad_request("the body's members are \"sql\" and \"params\" only");
  auto statement = doc->find("sql");
  if (statement == doc->end() || !statement->is_string()) return bad_request("\"sql\" is a string");
  auto params = doc->find("params");
  static const json kNone;  // null: no parameters
  const json& bound = params == doc->end() ? kNone : *params;
  if (!bound.is_null() && !bound.is_array() && !bound.is_object())
    return bad_request("\"params\" is an array, an object or null");

  auto store = stores_.sql(cap.capability.store, mode_of(cap));
  if (!store.ok()) return store_failure(store.failure());
  auto outcome = store.value()->execute(statement->get_ref<const std::string&>(), bound, request.cancel);
  if (!outcome.ok()) return store_failure(outcome.failure());
  const SqlOutcome& result = outcome.value();
  const bool wrote = !cap.capability.read_only && result.changes > 0;
  GatewayResponse r =
      json_reply(json{{"rows", result.rows}, {"changes", result.changes}}, wrote ? kWrite : kRead);
  r.detail["rows"] = result.rows.size();
  r.detail["changes"] = result.changes;
  return r;
}

GatewayResponse ResourceGateway::queue(const GatewayRequest& request, const BoundCapability& cap,
                                       QueueOp op) {
  auto store = stores_.queue(cap.capability.store);
  if (!store.ok()) return store_failure(store.failure());
  const QueueCapability qc{cap.store_id, store.value().quota};
  QueueStore& queue = *store.value().store;
  switch (op) {
    case QueueOp::kSend: {
      auto id = queue.send(qc, request.body);
      if (!id.ok()) return store_failure(id.failure());
      return json_reply(json{{"id", id.value()}}, kWrite);
    }
    case QueueOp::kReceive: {
      int64_t seconds = kDefaultVisibilitySeconds;
      if (!request.body.empty()) {
        const std::optional<json> doc = json_object(request.body);
        if (!doc || !only_members(*doc, {"visibility_seconds"}))
          return bad_request("the body is empty or {\"visibility_seconds\": N}");
        if (auto v = doc->find("visibility_seconds"); v != doc->end()) {
          if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxVisibilitySeconds)
            return bad_request("\"visibility_seconds\" is an integer from 1 to " +
                               std::to_string(kMaxVisibilitySeconds));
          seconds = v->get<int64_t>();
        }
      }
      auto message = queue.receive(qc, std::chrono::seconds(seconds));
      if (!message.ok()) return store_failure(message.failure());
      if (!message.value()) return no_content(kWrite);
      const QueueMessage& m = *message.value();
      return json_reply(json{{"id", m.id},
                             {"receipt", m.receipt},
                             {"body", bytes_json(m.body)},
                             {"deliveries", m.deliveries}},
                        kWrite);
    }
    case QueueOp::kAck: {
      const std::optional<json> doc = json_object(request.body);
      if (!doc || !only_members(*doc, {"receipt"})) return bad_request("the body is {\"receipt\": \"...\"}");
      auto receipt = doc->find("receipt");
      if (receipt == doc->end() || !receipt->is_string()) return bad_request("\"receipt\" is a string");
      const StoreStatus done = queue.ack(qc, receipt->get_ref<const std::string&>());
      if (!done.ok()) return store_failure(done.failure());
      return no_content(kWrite);
    }
  }
  return not_found("no route");
}

}  // namespace zn::broker
