// The network sinks by type name (issue 16): "syslog", "http", "nats". Each
// parses its own settings from the sink's JSON object in zerod's config
// (audit_sinks[i]) and throws std::invalid_argument naming the field
// ("$.audit_sinks[2].url: ...") on a bad one.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit_export/sink.h"

namespace zn::broker::audit_sinks {

// True for the types this folder makes.
bool is_network_sink_type(const std::string& type);

// Validates `config` (the sink's object; `path` is its JSON path for errors)
// without connecting anywhere: for `zerod --check-config` and start-up.
void check_network_sink(const nlohmann::json& config, const std::string& path);

// A sink of config["type"]; never connects here (deliver() does).
std::unique_ptr<audit_export::AuditSink> make_network_sink(const nlohmann::json& config,
                                                           const std::string& path,
                                                           const audit_export::SinkContext& context);

}  // namespace zn::broker::audit_sinks
