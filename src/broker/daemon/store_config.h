// zerod's config for capability-scoped resources (issue 13): "stores" (the
// backing stores by kind and name, strictly validated like the rest of the
// config) and "capability_addresses" (what cap.zeroness.internal resolves
// to for guests).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/resources/store_catalog.h"

namespace zn::broker {

// Throws PolicyError with the JSON path ("$.stores.sql.ledger.path").
// `state_dir`: where the KV and queue stores named "default" live unless the
// config names them (a capability without "store" uses "default").
StoreCatalog parse_store_catalog(const nlohmann::json& stores, const std::string& state_dir);

// Throws PolicyError: each an IPv4 or IPv6 address, at most one per family.
std::vector<std::string> parse_capability_addresses(const nlohmann::json& addresses);

}  // namespace zn::broker
