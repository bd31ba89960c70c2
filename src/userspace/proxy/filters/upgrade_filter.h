// Protocol upgrades: a WebSocket handshake is checked (400 if malformed) and
// marked, so that only a rule that allows WebSockets can let it through;
// any other upgrade (h2c, ...) would leave HTTP/1.1 and with it per-request
// policy, and is refused (403).
#pragma once

#include "userspace/proxy/filters/filter.h"

namespace zn::proxy::filters {

class UpgradeFilter final : public HeadFilter {
 public:
  std::string_view name() const override { return "upgrade"; }
  FilterResult on_head(Request& request, Connection& connection) const override;
};

}  // namespace zn::proxy::filters
