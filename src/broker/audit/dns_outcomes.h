// Turns governed DNS's allowed queries that got no address (NXDOMAIN, no
// data, an upstream failure) into dns:unanswered audit events, bounded like
// packet:deny: one record per (session, outcome, name) per second with a
// count, at most `names_per_second` names per session a second; past that,
// one record per parent domain (the name without its first label) with a
// count and the first name seen, at most as many; past that, one record per
// outcome with a count. A guest spelling data into the labels of an allowed
// wildcard leaves a trace whose size does not grow with the flood.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

namespace zn::broker {

enum class DnsOutcome { NxDomain, NoData, Error };

// "nxdomain", "nodata", "error": the `outcome` of dns:unanswered.
const char* dns_outcome_name(DnsOutcome outcome);

class DnsOutcomeAggregator {
 public:
  using Sink = std::function<void(const std::string& sid, const nlohmann::json& detail)>;
  static constexpr uint32_t kDefaultNamesPerSecond = 20;

  explicit DnsOutcomeAggregator(Sink sink, uint32_t names_per_second = kDefaultNamesPerSecond)
      : sink_(std::move(sink)), names_per_second_(names_per_second) {}

  // From the DNS responder's loop. `forwarded`: the name went upstream (its
  // labels left the host); false for what zerod answered itself.
  void add(const std::string& sid, const std::string& name, DnsOutcome outcome, bool forwarded);
  // Emits what was gathered; called once a second (and at shutdown). Any
  // thread; the sink runs outside the lock.
  void flush();
  // Queries summarised (past the per-name records) since the start.
  uint64_t aggregated() const;

 private:
  struct NameBucket {
    uint64_t count = 0;
    bool forwarded = false;
  };
  struct SuffixBucket {
    uint64_t count = 0;
    std::string sample;  // the first name
  };
  struct Window {  // one session's second
    std::map<std::tuple<DnsOutcome, std::string>, NameBucket> names;
    std::map<std::tuple<DnsOutcome, std::string>, SuffixBucket> suffixes;
    std::map<DnsOutcome, uint64_t> overflow;
  };

  Sink sink_;
  const uint32_t names_per_second_;
  mutable std::mutex mu_;
  std::map<std::string, Window> windows_;
  uint64_t aggregated_ = 0;
};

}  // namespace zn::broker
