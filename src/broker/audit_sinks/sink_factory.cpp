#include "broker/audit_sinks/sink_factory.h"

#include <stdexcept>

namespace zn::broker::audit_sinks {

bool is_network_sink_type(const std::string&) { return false; }

void check_network_sink(const nlohmann::json& config, const std::string& path) {
  throw std::invalid_argument(path + ".type: unknown sink type " + config.value("type", std::string("?")));
}

std::unique_ptr<audit_export::AuditSink> make_network_sink(const nlohmann::json& config,
                                                           const std::string& path,
                                                           const audit_export::SinkContext&) {
  check_network_sink(config, path);
  return nullptr;
}

}  // namespace zn::broker::audit_sinks
