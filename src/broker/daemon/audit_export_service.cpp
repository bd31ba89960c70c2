#include "broker/daemon/audit_export_service.h"

#include <unistd.h>

#include <set>

#include <spdlog/spdlog.h>

#include "broker/audit_export/file_sink.h"
#include "broker/audit_sinks/sink_factory.h"
#include "broker/control/metrics.h"
#include "broker/policy/parser.h"
#include "broker/secrets/host_key.h"

namespace zn::broker {

namespace {

// "$.audit_sinks[0].url: must be ..." -> PolicyError("$.audit_sinks[0].url", "must be ...").
[[noreturn]] void rethrow_as_policy_error(const std::invalid_argument& e, const std::string& fallback_path) {
  const std::string what = e.what();
  const size_t sep = what.find(": ");
  if (what.rfind("$.", 0) == 0 && sep != std::string::npos)
    throw PolicyError(what.substr(0, sep), what.substr(sep + 2));
  throw PolicyError(fallback_path, what);
}

std::string local_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

void check_audit_sinks(const nlohmann::json& sinks) {
  if (!sinks.is_array()) throw PolicyError("$.audit_sinks", "must be an array of sink objects");
  std::set<std::string> names;
  for (size_t i = 0; i < sinks.size(); ++i) {
    const std::string path = "$.audit_sinks[" + std::to_string(i) + "]";
    try {
      const audit_export::ExportSettings s = audit_export::parse_export_settings(sinks[i], path);
      if (!names.insert(s.name).second)
        throw PolicyError(path + ".name", "another sink has the name " + s.name);
      const nlohmann::json own = audit_export::type_fields(sinks[i]);
      if (s.type == "file")
        audit_export::parse_file_sink(own, path);
      else if (audit_sinks::is_network_sink_type(s.type))
        audit_sinks::check_network_sink(own, path);
      else
        throw PolicyError(path + ".type", "unknown sink type " + s.type);
    } catch (const std::invalid_argument& e) {
      rethrow_as_policy_error(e, path);
    }
  }
}

AuditExportService::AuditExportService(AuditExportConfig config, AuditLog& audit)
    : config_(std::move(config)) {
  if (config_.host.empty()) config_.host = local_host_name();
  const HostKey seed = HostKey::load_or_create(config_.signing_key);
  key_ = seed.with_key([](std::span<const unsigned char> s) { return SigningKey::from_seed(s); });
  sealer_ = std::make_shared<audit_export::BatchSealer>(key_, config_.host);
  for (size_t i = 0; i < config_.sinks.size(); ++i) {
    const nlohmann::json& sink = config_.sinks[i];
    const std::string path = "$.audit_sinks[" + std::to_string(i) + "]";
    audit_export::AuditExporter::Options o;
    o.settings = audit_export::parse_export_settings(sink, path);
    o.db_path = config_.db_path;
    o.cursor_path = config_.state_dir + "/audit-export/" + o.settings.name + ".cursor";
    o.host = config_.host;
    const nlohmann::json own = audit_export::type_fields(sink);
    std::unique_ptr<audit_export::AuditSink> s;
    if (o.settings.type == "file")
      s = std::make_unique<audit_export::FileSink>(audit_export::parse_file_sink(own, path));
    else
      s = audit_sinks::make_network_sink(own, path,
                                         audit_export::SinkContext{config_.host, config_.state_dir});
    // Posted, never appended: this runs on the exporter's thread, and the
    // record must not wait on the store the exporter is behind on.
    auto on_drop = [&audit](const std::string& name, const audit_export::DroppedRange& r) {
      audit.post({"audit:dropped",
                  "",
                  {{"sink", name},
                   {"first", r.first},
                   {"last", r.last},
                   {"count", r.count()},
                   {"reason", "spool_max_records"}}});
    };
    // The name and type only: a URL may carry credentials.
    spdlog::info("audit export: sink {} ({})", o.settings.name, o.settings.type);
    exporters_.push_back(std::make_unique<audit_export::AuditExporter>(std::move(o), std::move(s), sealer_,
                                                                       std::move(on_drop)));
  }
}

AuditExportService::~AuditExportService() = default;

void AuditExportService::notify() {
  for (auto& e : exporters_) e->notify();
}

nlohmann::json AuditExportService::public_key() const {
  return {{"public_key", audit_export::public_key_hex(key_->public_key())},
          {"kid", key_->kid()},
          {"host", config_.host}};
}

nlohmann::json AuditExportService::status() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : exporters_) {
    const audit_export::ExporterStats s = e->stats();
    out.push_back({{"name", e->name()},
                   {"up", s.up},
                   {"delivered_records", s.delivered_records},
                   {"delivered_batches", s.delivered_batches},
                   {"last_delivered_seq", s.last_delivered_seq},
                   {"consumed_seq", s.consumed_seq},
                   {"backlog", s.backlog},
                   {"failures", s.failures},
                   {"dropped_records", s.dropped_records},
                   {"last_error", s.last_error}});
  }
  return out;
}

std::string AuditExportService::metrics() const {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const auto& e : exporters_) out += prometheus_line(name, {{"sink", e->name()}}, value(e->stats()));
  };
  using S = audit_export::ExporterStats;
  family("zn_audit_export_delivered_records_total", "counter", "Audit records delivered to the sink.",
         [](const S& s) { return s.delivered_records; });
  family("zn_audit_export_failures_total", "counter", "Failed delivery attempts.",
         [](const S& s) { return s.failures; });
  family("zn_audit_export_dropped_records_total", "counter",
         "Audit records skipped for the sink because its spool bound was passed.",
         [](const S& s) { return s.dropped_records; });
  family("zn_audit_export_backlog_records", "gauge", "Records not yet delivered to the sink.",
         [](const S& s) { return s.backlog; });
  family("zn_audit_export_up", "gauge", "1 if the last delivery attempt succeeded.",
         [](const S& s) { return static_cast<uint64_t>(s.up ? 1 : 0); });
  return out;
}

}  // namespace zn::broker
