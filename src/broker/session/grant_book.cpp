#include "broker/session/grant_book.h"

#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace zn::broker {
namespace {

uint64_t random_id() {
  uint64_t id = 0;
  while (id == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&id), sizeof(id)) != 1)
      throw std::runtime_error("no randomness for a grant id");
    id &= 0x001fffffffffffffULL;  // exact in JSON numbers
  }
  return id;
}

std::string duration_text(std::chrono::seconds s) {
  if (s.count() % 3600 == 0) return std::to_string(s.count() / 3600) + "h";
  if (s.count() % 60 == 0) return std::to_string(s.count() / 60) + "m";
  return std::to_string(s.count()) + "s";
}

}  // namespace

GrantBook::GrantBook(std::chrono::seconds max_duration, Notify notify)
    : max_(max_duration), notify_(std::move(notify)) {}

Grant GrantBook::create(const GrantScope& scope, std::chrono::seconds duration, uint32_t uid, uint64_t ticket,
                        Clock::time_point now) {
  if (duration.count() <= 0) throw std::invalid_argument("a grant's duration must be at least 1s");
  if (duration > max_)
    throw std::invalid_argument("a grant's duration must be at most " + duration_text(max_) +
                                " (approval_grant_max_s)");
  Entry e;
  if (scope.pattern) {
    std::string why;
    e.pattern = PathPattern::parse(scope.path, &why);
    if (!e.pattern) throw std::invalid_argument("bad path pattern '" + scope.path + "': " + why);
  }
  e.grant.scope = scope;
  e.grant.ticket = ticket;
  e.grant.uid = uid;
  e.grant.created = std::chrono::system_clock::now();
  e.grant.expires = e.grant.created + duration;
  e.expires = now + duration;
  Grant made;
  std::vector<Grant> expired;
  {
    std::lock_guard lock(mu_);
    take_expired(now, expired);
    do e.grant.id = random_id();
    while (entries_.count(e.grant.id));
    made = e.grant;
    entries_.emplace(made.id, std::move(e));
  }
  report(expired, GrantEvent::kExpired);
  if (notify_) notify_(made, GrantEvent::kCreated);
  return made;
}

void GrantBook::take_expired(Clock::time_point now, std::vector<Grant>& ended) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now >= it->second.expires) {
      ended.push_back(std::move(it->second.grant));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void GrantBook::report(const std::vector<Grant>& ended, GrantEvent event) const {
  if (!notify_) return;
  for (const Grant& g : ended) notify_(g, event);
}

std::optional<Grant> GrantBook::covers(const std::string& session, const std::string& scheme,
                                       const std::string& method, const std::string& host,
                                       const std::string& path, Clock::time_point now) {
  std::optional<Grant> found;
  std::vector<Grant> expired;
  {
    std::lock_guard lock(mu_);
    if (entries_.empty()) return std::nullopt;
    for (auto it = entries_.begin(); it != entries_.end();) {
      Entry& e = it->second;
      if (now >= e.expires) {
        expired.push_back(std::move(e.grant));
        it = entries_.erase(it);
        continue;
      }
      const GrantScope& s = e.grant.scope;
      if (!found && s.session == session && s.scheme == scheme && s.method == method && s.host == host &&
          (e.pattern ? e.pattern->matches(path) : s.path == path))
        found = e.grant;
      ++it;
    }
  }
  report(expired, GrantEvent::kExpired);
  return found;
}

std::optional<Grant> GrantBook::revoke(uint64_t id, Clock::time_point now) {
  Grant ended;
  bool expired = false;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    expired = now >= it->second.expires;
    ended = std::move(it->second.grant);
    entries_.erase(it);
  }
  // Already over (not yet swept): reported as expired, and not revoked here.
  if (notify_) notify_(ended, expired ? GrantEvent::kExpired : GrantEvent::kRevoked);
  if (expired) return std::nullopt;
  return ended;
}

std::vector<Grant> GrantBook::live(Clock::time_point now) {
  std::vector<Grant> out, expired;
  {
    std::lock_guard lock(mu_);
    take_expired(now, expired);
    for (const auto& [id, e] : entries_) out.push_back(e.grant);
  }
  report(expired, GrantEvent::kExpired);
  std::sort(out.begin(), out.end(), [](const Grant& a, const Grant& b) { return a.created < b.created; });
  return out;
}

size_t GrantBook::sweep(Clock::time_point now) {
  std::vector<Grant> expired;
  {
    std::lock_guard lock(mu_);
    take_expired(now, expired);
  }
  report(expired, GrantEvent::kExpired);
  return expired.size();
}

void GrantBook::forget_session(const std::string& session) {
  std::vector<Grant> ended;
  {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.grant.scope.session == session) {
        ended.push_back(std::move(it->second.grant));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  report(ended, GrantEvent::kSessionDeleted);
}

std::optional<std::chrono::seconds> parse_grant_duration(const std::string& text) {
  if (text.size() < 2 || text.size() > 12) return std::nullopt;
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const uint64_t n = std::stoull(digits);
  switch (text.back()) {
    case 's':
      return std::chrono::seconds(n);
    case 'm':
      return std::chrono::seconds(n * 60);
    case 'h':
      return std::chrono::seconds(n * 3600);
    default:
      return std::nullopt;
  }
}

}  // namespace zn::broker
