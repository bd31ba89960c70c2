#include "broker/audit_export/sink.h"

namespace zn::broker::audit_export {

std::string event_category(const std::string& event) {
  const size_t colon = event.find(':');
  return colon == std::string::npos ? event : event.substr(0, colon);
}

}  // namespace zn::broker::audit_export
