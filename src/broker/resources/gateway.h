// The capability gateway's HTTP API (issue 13): one parsed request to
// cap.zeroness.internal and the requesting session's handle lookup in, the
// response and its audit record out. The proxy terminates TLS, reads the
// request and writes the response; this is everything in between.
//
//   GET|PUT|DELETE /v1/kv/<handle>/<key>     value in and out as raw bytes
//   GET|PUT        /v1/blob/<handle>/<path>  object in and out as raw bytes
//   POST /v1/sql/<handle>                    {"sql", "params"} -> {"rows", "changes"}
//   POST /v1/queue/<handle>/send             body = the message -> {"id"}
//   POST /v1/queue/<handle>/receive          {"visibility_seconds"} -> the message, or 204
//   POST /v1/queue/<handle>/ack              {"receipt"} -> 204
//
// No enumeration: the route's shape is read first, then the handle looked
// up, and until it resolves to a capability of the route's kind every answer
// is the same 404 as a missing key, byte for byte (the audit tells them
// apart). Only then does the guest learn anything else (405, 403, 400...).
// Errors are {"error": {"code", "message"}}, code a stable string
// (to_string(StoreError), "method_not_allowed"); no message quotes a value,
// key, path, statement or handle, nor names a file. The audit record says
// who, what and how much, never contents.
//
// Threads: serve blocks (the stores: SQLite, disk); call it on a worker,
// never on the proxy's loop. Any thread, concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/policy/policy.h"
#include "broker/resources/gateway_route.h"
#include "broker/resources/store_set.h"

namespace zn::broker {

struct GatewayRequest {
  std::string method;  // uppercase
  std::string target;  // the request-target as sent: "/v1/kv/cap%3AABC.../my%20key?x=1"
  std::string body;    // whole, already de-chunked
  // Set when the capability the call runs under is revoked: a SQL call in
  // progress stops (the other stores' calls are short and finish).
  const std::atomic<bool>* cancel = nullptr;
};

// A capability of the requesting session, found by its handle.
struct BoundCapability {
  std::string name;       // the policy's name for it
  Capability capability;  // kind, read_only, store
  std::string store_id;   // capability_store_id(handle)
};

struct GatewayResponse {
  int status = 500;
  std::string content_type;  // "application/json" or "application/octet-stream" ("" for 204)
  std::string body;
  std::string event;  // "resource:read" | "resource:write" | "resource:deny"
  // For the audit: cap (once resolved), kind, op, status, bytes_in,
  // bytes_out; rows and changes (sql); code (errors); reason (a 404's:
  // "no route", "malformed handle", "unknown handle", "wrong kind",
  // "missing").
  nlohmann::json detail;
};

// The requesting session's capability bound to exactly this handle, nullopt
// otherwise (no such handle, another session's). The caller's: it compares
// handles, in constant time.
using HandleLookup = std::function<std::optional<BoundCapability>(std::string_view handle)>;

// Every error body of the gateway, {"error": {"code", "message"}}: one
// builder, so a refusal made before routing (no session, the rate) reads
// byte for byte like the gateway's own.
std::string gateway_error_body(std::string_view code, std::string_view message);

class ResourceGateway {
 public:
  explicit ResourceGateway(StoreSet& stores);

  GatewayResponse serve(const GatewayRequest& request, const HandleLookup& find);

  // Bounds of a queue receive's "visibility_seconds".
  static constexpr int64_t kDefaultVisibilitySeconds = 30;
  static constexpr int64_t kMaxVisibilitySeconds = 12 * 60 * 60;  // QueueStore::kMaxVisibility

 private:
  GatewayResponse route(const GatewayRequest& request, const HandleLookup& find, nlohmann::json& detail);
  GatewayResponse kv(const GatewayRequest& request, const BoundCapability& cap, const std::string& key);
  GatewayResponse blob(const GatewayRequest& request, const BoundCapability& cap, const std::string& path);
  GatewayResponse sql(const GatewayRequest& request, const BoundCapability& cap);
  GatewayResponse queue(const GatewayRequest& request, const BoundCapability& cap, QueueOp op);

  StoreSet& stores_;
};

}  // namespace zn::broker
