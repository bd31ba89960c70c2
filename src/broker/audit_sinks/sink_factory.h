// The network sinks by type name (issue 16): "syslog", "http", "nats". Each
// parses its own settings from the sink's JSON object in zerod's config
// (audit_sinks[i]) and throws std::invalid_argument naming the field
// ("$.audit_sinks[2].url: ...") on a bad one.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/audit_export/sink.h"
#include "broker/audit_sinks/http_sink.h"
#include "broker/audit_sinks/syslog_sink.h"

namespace zn::broker::audit_sinks {

// The only shared field a network sink's check sees: zerod strips the
// exporter's own (name, format, events, sessions, ...: audit_export::
// type_fields) before calling, so any other field a type does not know is an
// error, never a setting silently ignored.
inline constexpr std::array<std::string_view, 1> kExporterSinkFields = {"type"};

// True for the types this folder makes.
bool is_network_sink_type(const std::string& type);

// Validates `config` (the sink's object; `path` is its JSON path for errors)
// without connecting anywhere: for `zerod --check-config` and start-up.
// Reads the files it names (CA certificates, the token file's owner and mode).
void check_network_sink(const nlohmann::json& config, const std::string& path);

// A sink of config["type"]; never connects here (deliver() does).
std::unique_ptr<audit_export::AuditSink> make_network_sink(const nlohmann::json& config,
                                                           const std::string& path,
                                                           const audit_export::SinkContext& context);

// Each type's settings, checked (what check_network_sink runs for the type).
SyslogSinkOptions syslog_sink_options(const nlohmann::json& config, const std::string& path);
HttpSinkOptions http_sink_options(const nlohmann::json& config, const std::string& path);

}  // namespace zn::broker::audit_sinks
