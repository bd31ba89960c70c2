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

}  // namespace zn::broker
