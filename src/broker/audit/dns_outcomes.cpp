#include "broker/audit/dns_outcomes.h"

#include <vector>

namespace zn::broker {
namespace {

// The parent domain: "a.b.example.com" -> "b.example.com"; a single label
// stands for itself. Names come escaped (\. is part of a label), and an
// escaped name never reaches a resolver, but the rule is the same.
std::string parent_of(const std::string& name) {
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '\\') {
      ++i;
      continue;
    }
    if (name[i] == '.') return name.substr(i + 1);
  }
  return name;
}

}  // namespace

const char* dns_outcome_name(DnsOutcome outcome) {
  switch (outcome) {
    case DnsOutcome::NxDomain:
      return "nxdomain";
    case DnsOutcome::NoData:
      return "nodata";
    case DnsOutcome::Error:
      return "error";
  }
  return "error";
}

void DnsOutcomeAggregator::add(const std::string& sid, const std::string& name, DnsOutcome outcome,
                               bool forwarded) {
  std::lock_guard lock(mu_);
  Window& w = windows_[sid];
  auto named = w.names.find({outcome, name});
  if (named != w.names.end() || w.names.size() < names_per_second_) {
    NameBucket& b = named != w.names.end() ? named->second : w.names[{outcome, name}];
    ++b.count;
    b.forwarded = b.forwarded || forwarded;
    return;
  }
  ++aggregated_;
  const std::string parent = parent_of(name);
  auto suffix = w.suffixes.find({outcome, parent});
  if (suffix != w.suffixes.end() || w.suffixes.size() < names_per_second_) {
    SuffixBucket& b = suffix != w.suffixes.end() ? suffix->second : w.suffixes[{outcome, parent}];
    if (b.count++ == 0) b.sample = name;
    return;
  }
  ++w.overflow[outcome];
}

void DnsOutcomeAggregator::flush() {
  std::map<std::string, Window> windows;
  {
    std::lock_guard lock(mu_);
    windows.swap(windows_);
  }
  for (const auto& [sid, w] : windows) {
    for (const auto& [key, b] : w.names)
      sink_(sid, {{"name", std::get<1>(key)},
                  {"outcome", dns_outcome_name(std::get<0>(key))},
                  {"forwarded", b.forwarded},
                  {"count", b.count}});
    for (const auto& [key, b] : w.suffixes)
      sink_(sid, {{"suffix", std::get<1>(key)},
                  {"outcome", dns_outcome_name(std::get<0>(key))},
                  {"sample", b.sample},
                  {"count", b.count}});
    for (const auto& [outcome, count] : w.overflow)
      sink_(sid, {{"outcome", dns_outcome_name(outcome)}, {"count", count}});
  }
}

uint64_t DnsOutcomeAggregator::aggregated() const {
  std::lock_guard lock(mu_);
  return aggregated_;
}

}  // namespace zn::broker
