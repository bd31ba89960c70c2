#include "broker/policy/policy.h"

namespace zn::broker {

bool is_resource_metadata(std::string_view field) { return field == "kind" || field == "placeholder"; }

const Secret* Resource::credential() const {
  const char* name = kind == ResourceKind::kBasic   ? "password"
                     : kind == ResourceKind::kToken ? "token"
                                                    : "accessToken";
  auto it = fields.find(name);
  return it == fields.end() ? nullptr : &it->second;
}

std::string_view capability_kind_name(CapabilityKind kind) {
  switch (kind) {
    case CapabilityKind::kKv:
      return "kv";
    case CapabilityKind::kBlob:
      return "blob";
    case CapabilityKind::kSql:
      return "sql";
    case CapabilityKind::kQueue:
      return "queue";
  }
  return "?";
}

}  // namespace zn::broker
