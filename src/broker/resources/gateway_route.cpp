#include "broker/resources/gateway_route.h"

#include <vector>

#include "userspace/http/message.h"

namespace zn::broker {

namespace {

constexpr size_t kHandleChars = 32;  // after the prefix, as cap_handles.h issues them

std::vector<std::string_view> split(std::string_view path) {
  std::vector<std::string_view> out;
  for (;;) {
    const size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) return out;
    path.remove_prefix(slash + 1);
  }
}

std::optional<CapabilityKind> kind_named(std::string_view name) {
  if (name == "kv") return CapabilityKind::kKv;
  if (name == "blob") return CapabilityKind::kBlob;
  if (name == "sql") return CapabilityKind::kSql;
  if (name == "queue") return CapabilityKind::kQueue;
  return std::nullopt;
}

std::optional<QueueOp> queue_op_named(std::string_view name) {
  if (name == "send") return QueueOp::kSend;
  if (name == "receive") return QueueOp::kReceive;
  if (name == "ack") return QueueOp::kAck;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> percent_decode_path(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = http::hex_value(text[i + 1]), lo = http::hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool well_formed_handle(std::string_view handle) {
  constexpr std::string_view kPrefix = "cap:";
  if (handle.size() != kPrefix.size() + kHandleChars || !handle.starts_with(kPrefix)) return false;
  for (char c : handle.substr(kPrefix.size()))
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  return true;
}

GatewayRoute parse_gateway_route(std::string_view target) {
  GatewayRoute route;
  const std::string_view path = target.substr(0, target.find('?'));
  if (!path.starts_with('/')) return route;
  const std::vector<std::string_view> segments = split(path.substr(1));
  if (segments.size() < 3 || percent_decode_path(segments[0]) != "v1") return route;
  const std::optional<std::string> kind_name = percent_decode_path(segments[1]);
  route.kind = kind_name ? kind_named(*kind_name) : std::nullopt;
  if (!route.kind) return route;

  switch (*route.kind) {
    case CapabilityKind::kKv:
    case CapabilityKind::kBlob:
      // The key or path is everything after "/v1/<kind>/<handle>/", slashes
      // and all.
      if (segments.size() < 4) return route;
      route.rest = std::string(path.substr(segments[3].data() - path.data()));
      break;
    case CapabilityKind::kSql:
      if (segments.size() != 3) return route;
      break;
    case CapabilityKind::kQueue: {
      if (segments.size() != 4) return route;
      const std::optional<std::string> op_name = percent_decode_path(segments[3]);
      const std::optional<QueueOp> op = op_name ? queue_op_named(*op_name) : std::nullopt;
      if (!op) return route;
      route.queue_op = *op;
      break;
    }
  }
  std::optional<std::string> handle = percent_decode_path(segments[2]);
  if (!handle) return route;
  route.handle = std::move(*handle);
  route.matched = true;
  return route;
}

}  // namespace zn::broker
