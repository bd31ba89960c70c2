#include "userspace/proxy/filters/upgrade_filter.h"

#include "userspace/websocket/handshake.h"

namespace zn::proxy::filters {

FilterResult UpgradeFilter::on_head(Request& request, Connection& connection) const {
  request.websocket = false;
  if (!request.head.upgrade) return FilterResult::go();
  if (!connection.facts.local && websocket::asks_for_websocket(request.head)) {
    const std::string bad = websocket::request_error(request.head);
    if (!bad.empty()) {
      connection.counters.bad_requests++;
      return FilterResult::refused_here(400, "zeroness: bad request (" + bad + ")\n",
                                        "bad WebSocket handshake: " + bad);
    }
    request.websocket = true;
    request.summary.websocket = true;
    return FilterResult::go();
  }
  connection.counters.denied++;
  return FilterResult::refused_here(403, "zeroness: blocked by policy (protocol upgrade not allowed)\n",
                                    "protocol upgrade not allowed");
}

}  // namespace zn::proxy::filters
