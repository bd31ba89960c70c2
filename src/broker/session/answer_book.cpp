#include "broker/session/answer_book.h"

#include <algorithm>
#include <stdexcept>

namespace zn::broker {

DnsAnswerBook::DnsAnswerBook(size_t max_names) : max_names_(max_names) {
  if (max_names_ == 0) throw std::invalid_argument("DnsAnswerBook: a session must keep at least one name");
}

void DnsAnswerBook::erase_locked(std::unordered_map<std::string, Entry>::iterator e) {
  recency_.erase(e->second.position);
  by_expiry_.erase(e->second.expiry);
  entries_.erase(e);
}

size_t DnsAnswerBook::make_room_locked(TimePoint t) {
  // Expired answers are worth nothing: dropped before any live one, and not
  // counted. Soonest expiry first, so each step is logarithmic however
  // many names the session holds.
  while (entries_.size() >= max_names_ && !by_expiry_.empty() && by_expiry_.begin()->first < t)
    erase_locked(entries_.find(by_expiry_.begin()->second));
  // Then the least recently used (told or looked up) live answer.
  size_t evicted = 0;
  while (entries_.size() >= max_names_) {
    erase_locked(entries_.find(recency_.back()));
    ++evicted;
  }
  return evicted;
}

size_t DnsAnswerBook::record(const std::string& name, const std::vector<net::IpAddress>& addresses,
                             uint32_t ttl, TimePoint t) {
  std::lock_guard lock(mu_);
  size_t evicted = 0;
  auto found = entries_.find(name);
  if (found == entries_.end()) {
    evicted = make_room_locked(t);
    recency_.push_front(name);
    found = entries_.emplace(name, Entry{{}, {}, recency_.begin(), by_expiry_.end()}).first;
  } else {
    recency_.splice(recency_.begin(), recency_, found->second.position);
    by_expiry_.erase(found->second.expiry);
  }
  Entry& e = found->second;
  for (const auto& addr : addresses)
    if (std::find(e.addresses.begin(), e.addresses.end(), addr) == e.addresses.end())
      e.addresses.push_back(addr);
  e.expires = t + std::chrono::seconds(ttl);
  e.expiry = by_expiry_.emplace(e.expires, name);
  return evicted;
}

std::vector<net::IpAddress> DnsAnswerBook::lookup(const std::string& name, TimePoint t) {
  std::lock_guard lock(mu_);
  auto e = entries_.find(name);
  if (e == entries_.end()) return {};
  if (e->second.expires < t) {
    erase_locked(e);
    return {};
  }
  recency_.splice(recency_.begin(), recency_, e->second.position);
  return e->second.addresses;
}

size_t DnsAnswerBook::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace zn::broker
