// Turns the datapath's drop events into packet:deny audit events, one per
// (session, reason, destination) per second with a count, so a flood of
// drops becomes a handful of audit records.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "zn_abi.h"

namespace zn::broker {

class DropEventAggregator {
 public:
  using SessionName = std::function<std::string(uint32_t session_idx)>;  // "" = unknown
  using Sink = std::function<void(const std::string& sid, const nlohmann::json& detail)>;

  DropEventAggregator(SessionName name_of, Sink sink)
      : name_of_(std::move(name_of)), sink_(std::move(sink)) {}

  void add(const zn_drop_event& event);
  // Emits what was gathered; called once a second (and at shutdown).
  void flush();
  size_t pending() const { return buckets_.size(); }

 private:
  struct Bucket {
    uint64_t count = 0;
    zn_drop_event first{};
  };
  // (session, reason, direction, family, proto, dst address, dst port)
  using Key = std::tuple<uint32_t, uint16_t, uint8_t, uint8_t, uint8_t, std::string, uint16_t>;
  SessionName name_of_;
  Sink sink_;
  std::map<Key, Bucket> buckets_;
};

}  // namespace zn::broker
