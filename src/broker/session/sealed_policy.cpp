#include "broker/session/sealed_policy.h"

#include <sodium.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "broker/policy/parser.h"
#include "broker/secrets/sealer.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

constexpr std::string_view kEnvelopePrefix = "znsealed:";

json parse_json(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw std::invalid_argument("policy is not JSON");
  return doc;
}

// Calls f(resource, field, the value's string) for every secret resource
// value (not "kind" or "placeholder": they are not secret).
template <class F>
void for_each_value(json& doc, F&& f) {
  if (!doc.is_object() || !doc.contains("resources") || !doc["resources"].is_object()) return;
  for (auto& [name, fields] : doc["resources"].items()) {
    if (!fields.is_object()) continue;
    for (auto& [field, value] : fields.items())
      if (value.is_string() && !is_resource_metadata(field))
        f(name, field, value.template get_ref<std::string&>());
  }
}

// Plaintext that passed through a JSON document: wiped before it is freed.
void wipe(std::string& s) {
  if (!s.empty()) sodium_memzero(s.data(), s.size());
}

std::string where(std::string_view session_id, const std::string& resource, const std::string& field) {
  return "session '" + std::string(session_id) + "', resources." + resource + "." + field;
}

}  // namespace

std::string resource_context(std::string_view session_id, std::string_view resource, std::string_view field) {
  return "zeroness/session/" + std::string(session_id) + "/resources/" + std::string(resource) + "/" +
         std::string(field);
}

std::string seal_policy_json(const HostKey& key, std::string_view session_id, std::string_view policy_json) {
  json doc = parse_json(policy_json);
  for_each_value(doc, [&](const std::string& resource, const std::string& field, std::string& value) {
    std::string sealed = seal(key, value, resource_context(session_id, resource, field));
    wipe(value);
    value = std::move(sealed);
  });
  return doc.dump();
}

OpenedPolicy open_sealed_policy(std::span<const HostKey* const> keys, std::string_view session_id,
                                std::string_view sealed_json) {
  OpenedPolicy out;
  std::optional<std::string> failure;
  const SecretReader read = [&](const std::string& resource, const std::string& field,
                                const std::string& text) -> Secret {
    if (!std::string_view(text).starts_with(kEnvelopePrefix)) {
      out.had_plaintext = true;
      return Secret(text);
    }
    Unsealed opened;
    for (size_t i = 0; i < keys.size(); ++i) {
      opened = unseal(*keys[i], text, resource_context(session_id, resource, field));
      if (opened.ok()) {
        if (i > 0) out.had_other_key = true;
        return std::move(*opened.value);
      }
      if (opened.error != UnsealError::kWrongKey) break;
    }
    failure = where(session_id, resource, field) + ": " + opened.message;
    throw std::runtime_error(*failure);
  };
  try {
    out.policy = parse_policy(sealed_json, read);
  } catch (const PolicyError&) {
    if (failure) throw SealedStateError(*failure);
    throw;
  }
  return out;
}

std::string reseal_policy_json(const HostKey& from, const HostKey& to, std::string_view session_id,
                               std::string_view sealed_json) {
  json doc = parse_json(sealed_json);
  for_each_value(doc, [&](const std::string& resource, const std::string& field, std::string& value) {
    const std::string context = resource_context(session_id, resource, field);
    if (!std::string_view(value).starts_with(kEnvelopePrefix)) {
      std::string sealed = seal(to, value, context);  // a value from before sealing
      wipe(value);
      value = std::move(sealed);
      return;
    }
    Resealed r = reseal(from, to, value, context);
    if (!r.ok()) throw SealedStateError(where(session_id, resource, field) + ": " + r.message);
    value = std::move(r.envelope);
  });
  return doc.dump();
}

}  // namespace zn::broker
