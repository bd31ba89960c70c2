#include "broker/session/upstream_cache.h"

#include <algorithm>
#include <exception>

namespace zn::broker {

UpstreamResolutionCache::UpstreamResolutionCache(UpstreamCacheConfig config, Clock clock)
    : config_(config), clock_(std::move(clock)) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
}

void UpstreamResolutionCache::make_room_locked(std::chrono::steady_clock::time_point now) {
  if (names_.size() < config_.max_names_per_session) return;
  std::erase_if(names_, [now](const auto& kv) { return kv.second.expires <= now; });
  // Still full: every entry is fresh or in flight. Dropping the session's
  // finished entries costs only this session re-resolutions; entries in
  // flight stay, their resolvers will fill them.
  if (names_.size() >= config_.max_names_per_session)
    std::erase_if(names_, [](const auto& kv) {
      return kv.second.expires != std::chrono::steady_clock::time_point::max();
    });
}

std::vector<net::IpAddress> UpstreamResolutionCache::get(const std::string& host, const Resolve& resolve) {
  std::promise<TimedAddresses> mine;
  std::shared_future<TimedAddresses> answer;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_();
    auto it = names_.find(host);
    if (it != names_.end() && it->second.expires > now) {
      answer = it->second.answer;
    } else {
      if (it == names_.end()) {
        make_room_locked(now);
        it = names_.emplace(host, Entry{}).first;
      }
      it->second.answer = mine.get_future().share();
      it->second.expires = std::chrono::steady_clock::time_point::max();
      ++resolutions_;
    }
  }
  if (answer.valid()) return answer.get().addresses;  // remembered, or another caller's resolution

  TimedAddresses got;
  try {
    got = resolve(host);
  } catch (...) {
    got = {};  // a failed resolution is an empty answer, never remembered
  }
  mine.set_value(got);
  {
    std::lock_guard lock(mu_);
    // Still there: an entry in flight is never made room for (make_room_locked)
    // and never replaced (its expiry is max()), so it is this resolution's.
    auto it = names_.find(host);
    if (it != names_.end()) {
      const auto ttl = std::min<std::chrono::seconds>(std::chrono::seconds(got.ttl), config_.max_ttl);
      if (got.addresses.empty() || ttl.count() <= 0)
        names_.erase(it);
      else
        it->second.expires = clock_() + ttl;
    }
  }
  return got.addresses;
}

size_t UpstreamResolutionCache::size() const {
  std::lock_guard lock(mu_);
  return names_.size();
}

uint64_t UpstreamResolutionCache::resolutions() const {
  std::lock_guard lock(mu_);
  return resolutions_;
}

}  // namespace zn::broker
