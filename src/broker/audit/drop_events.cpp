#include "broker/audit/drop_events.h"

#include <arpa/inet.h>

#include "userspace/datapath/verdict_names.h"

namespace zn::broker {
namespace {

std::string address(uint8_t family, const uint8_t* bytes) {
  char buf[INET6_ADDRSTRLEN] = "";
  if (family == 4 || family == 6) inet_ntop(family == 6 ? AF_INET6 : AF_INET, bytes, buf, sizeof(buf));
  return buf;
}

}  // namespace

void DropEventAggregator::add(const zn_drop_event& e) {
  Key key{e.session_idx, e.reason, e.direction, e.family, e.proto, address(e.family, e.daddr),
          ntohs(e.dport)};
  Bucket& b = buckets_[key];
  if (b.count++ == 0) b.first = e;
}

void DropEventAggregator::flush() {
  for (const auto& [key, bucket] : buckets_) {
    const zn_drop_event& e = bucket.first;
    std::string sid = name_of_(e.session_idx);
    nlohmann::json detail = {{"reason", std::string(dp::verdict_name(e.reason))},
                             {"direction", e.direction == 0 ? "from_guest" : "to_guest"},
                             {"count", bucket.count}};
    if (sid.empty()) detail["session_idx"] = e.session_idx;
    if (e.family == 4 || e.family == 6) {
      const uint16_t dport = ntohs(e.dport);
      detail["proto"] = e.proto;
      detail["src"] = address(e.family, e.saddr);
      detail["dst"] = address(e.family, e.daddr);
      if (dport) detail["dport"] = dport;
    } else {
      detail["ethertype"] = ntohs(e.ethertype);
    }
    sink_(sid, detail);
  }
  buckets_.clear();
}

}  // namespace zn::broker
