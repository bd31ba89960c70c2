#include "broker/session/answer_book.h"

#include <algorithm>
#include <stdexcept>

namespace zn::broker {

DnsAnswerBook::DnsAnswerBook(size_t max_names_per_session, Clock clock)
    : max_names_(max_names_per_session), clock_(std::move(clock)) {
  if (max_names_ == 0) throw std::invalid_argument("DnsAnswerBook: a session must keep at least one name");
}

std::chrono::steady_clock::time_point DnsAnswerBook::now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

void DnsAnswerBook::erase_locked(Names& names, std::unordered_map<std::string, Entry>::iterator e) {
  names.recency.erase(e->second.position);
  names.by_expiry.erase(e->second.expiry);
  names.entries.erase(e);
}

void DnsAnswerBook::make_room_locked(Names& names, std::chrono::steady_clock::time_point t) {
  // Expired answers are worth nothing: dropped before any live one, and not
  // counted. Soonest expiry first, so each step is logarithmic however
  // many names the session holds.
  while (names.entries.size() >= max_names_ && !names.by_expiry.empty() && names.by_expiry.begin()->first < t)
    erase_locked(names, names.entries.find(names.by_expiry.begin()->second));
  // Then the least recently used (told or looked up) live answer.
  while (names.entries.size() >= max_names_) {
    erase_locked(names, names.entries.find(names.recency.back()));
    evictions_.fetch_add(1, std::memory_order_relaxed);
  }
}

void DnsAnswerBook::record(const std::string& session, const std::string& name,
                           const std::vector<net::IpAddress>& addresses, uint32_t ttl) {
  const auto t = now();
  std::lock_guard lock(mu_);
  Names& names = sessions_[session];
  auto found = names.entries.find(name);
  if (found == names.entries.end()) {
    make_room_locked(names, t);
    names.recency.push_front(name);
    found = names.entries.emplace(name, Entry{{}, {}, names.recency.begin(), names.by_expiry.end()}).first;
  } else {
    names.recency.splice(names.recency.begin(), names.recency, found->second.position);
    names.by_expiry.erase(found->second.expiry);
  }
  Entry& e = found->second;
  for (const auto& addr : addresses)
    if (std::find(e.addresses.begin(), e.addresses.end(), addr) == e.addresses.end())
      e.addresses.push_back(addr);
  e.expires = t + std::chrono::seconds(ttl);
  e.expiry = names.by_expiry.emplace(e.expires, name);
}

std::vector<net::IpAddress> DnsAnswerBook::lookup(const std::string& session, const std::string& name) {
  const auto t = now();
  std::lock_guard lock(mu_);
  auto s = sessions_.find(session);
  if (s == sessions_.end()) return {};
  Names& names = s->second;
  auto e = names.entries.find(name);
  if (e == names.entries.end()) return {};
  if (e->second.expires < t) {
    erase_locked(names, e);
    return {};
  }
  names.recency.splice(names.recency.begin(), names.recency, e->second.position);
  return e->second.addresses;
}

void DnsAnswerBook::forget(const std::string& session) {
  std::lock_guard lock(mu_);
  sessions_.erase(session);
}

size_t DnsAnswerBook::size(const std::string& session) const {
  std::lock_guard lock(mu_);
  auto s = sessions_.find(session);
  return s == sessions_.end() ? 0 : s->second.entries.size();
}

}  // namespace zn::broker
