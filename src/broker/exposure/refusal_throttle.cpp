#include "broker/exposure/refusal_throttle.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "userspace/net/address.h"

namespace zn::broker {

RefusalThrottle::RefusalThrottle()
    : RefusalThrottle(Limits{}, [] { return std::chrono::steady_clock::now(); }) {}

RefusalThrottle::RefusalThrottle(Limits limits, Clock clock) : limits_(limits), clock_(std::move(clock)) {}

double RefusalThrottle::refill(Bucket& b, std::chrono::steady_clock::time_point now) const {
  const double seconds = std::chrono::duration<double>(now - b.at).count();
  if (seconds > 0) b.tokens = std::min(limits_.burst, b.tokens + seconds * limits_.per_second);
  b.at = now;
  return b.tokens;
}

std::optional<std::chrono::seconds> RefusalThrottle::throttled(const std::string& session, uint16_t port,
                                                               const std::string& client) {
  const auto now = clock_();
  std::lock_guard lock(mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) return std::nullopt;
  const double tokens = refill(it->second, now);
  if (tokens >= 1) return std::nullopt;
  auto key = std::make_tuple(session, port, client);
  auto c = counted_.find(key);
  if (c == counted_.end() && counted_.size() >= limits_.max_clients)
    c = counted_.try_emplace({session, port, "*"}, 0).first;
  else if (c == counted_.end())
    c = counted_.emplace(std::move(key), 0).first;
  ++c->second;
  // Whole seconds, rounded up: a client that comes back sooner is refused
  // again. A zero rate never refills: a day, as long as is worth saying.
  constexpr double kMaxWait = 86400;
  const double wait = limits_.per_second > 0 ? std::ceil((1 - tokens) / limits_.per_second) : kMaxWait;
  return std::chrono::seconds(static_cast<int64_t>(std::clamp(wait, 1.0, kMaxWait)));
}

void RefusalThrottle::charge(const std::string& client) {
  const auto now = clock_();
  std::lock_guard lock(mu_);
  auto it = buckets_.find(client);
  if (it == buckets_.end()) {
    if (!by_refusal_.empty() && buckets_.size() >= limits_.max_clients) {
      // The client refused longest ago.
      buckets_.erase(by_refusal_.back());
      by_refusal_.pop_back();
      ++evictions_;
    }
    by_refusal_.push_front(client);
    it = buckets_.emplace(client, Bucket{limits_.burst, now, by_refusal_.begin()}).first;
  } else {
    by_refusal_.splice(by_refusal_.begin(), by_refusal_, it->second.order);
  }
  refill(it->second, now);
  it->second.tokens = std::max(0.0, it->second.tokens - 1);
}

std::vector<RefusalThrottle::Summary> RefusalThrottle::take_summaries() {
  std::lock_guard lock(mu_);
  std::vector<Summary> out;
  out.reserve(counted_.size());
  for (const auto& [key, count] : counted_)
    out.push_back(Summary{std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
  counted_.clear();
  return out;
}

uint64_t RefusalThrottle::evictions() const {
  std::lock_guard lock(mu_);
  return evictions_;
}

size_t RefusalThrottle::clients() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

std::string client_key(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return net::to_string(reinterpret_cast<const sockaddr_in&>(ss).sin_addr);
  if (ss.ss_family != AF_INET6) return "";
  const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) {
    in_addr v4;
    std::memcpy(&v4, a.s6_addr + 12, 4);
    return net::to_string(v4);
  }
  in6_addr prefix{};
  std::memcpy(prefix.s6_addr, a.s6_addr, 8);
  return net::to_string(prefix) + "/64";
}

}  // namespace zn::broker
