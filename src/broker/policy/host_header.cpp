#include "broker/policy/host_header.h"

#include <cctype>

namespace zn::broker {

std::optional<HostHeader> parse_host_header(std::string_view v) {
  HostHeader h;
  std::string_view host = v;
  std::string_view port;
  if (!v.empty() && v.front() == '[') {
    size_t close = v.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = v.substr(1, close - 1);
    std::string_view rest = v.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
  } else if (size_t colon = v.rfind(':'); colon != std::string_view::npos) {
    host = v.substr(0, colon);
    port = v.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  if (port.data() != nullptr) {
    if (port.empty() || port.size() > 5) return std::nullopt;
    unsigned value = 0;
    for (char c : port) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    if (value == 0 || value > 65535) return std::nullopt;
    h.port = static_cast<uint16_t>(value);
  }
  h.name.assign(host);
  for (char& c : h.name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h.name.size() > 1 && h.name.back() == '.') h.name.pop_back();
  return h;
}

}  // namespace zn::broker
