#include "broker/session/index.h"

#include <cstring>
#include <mutex>
#include <string_view>

namespace zn::broker {
namespace {

std::array<uint8_t, 16> key_of(const in6_addr& a) {
  std::array<uint8_t, 16> k;
  std::memcpy(k.data(), &a, k.size());
  return k;
}

template <typename Map, typename Key>
SessionPtr find_in(const Map& map, const Key& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : it->second;
}

}  // namespace

size_t SessionIndex::Ip6Hash::operator()(const Ip6Key& k) const noexcept {
  return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(k.data()), k.size()));
}

void SessionIndex::unindex_locked(const Session& s) {
  by_ip4_.erase(s.net.guest_ip4.s_addr);
  by_ip6_.erase(key_of(s.net.guest_ip6));
  by_ifindex_.erase(s.ifindex);
  by_idx_.erase(s.record.session_idx);
}

void SessionIndex::put(SessionPtr s) {
  std::unique_lock lock(mu_);
  auto& slot = by_id_[s->record.id];
  if (slot) unindex_locked(*slot);
  slot = s;
  by_ip4_[s->net.guest_ip4.s_addr] = s;
  by_ip6_[key_of(s->net.guest_ip6)] = s;
  by_ifindex_[s->ifindex] = s;
  by_idx_[s->record.session_idx] = s;
}

SessionPtr SessionIndex::erase(const std::string& id) {
  std::unique_lock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return nullptr;
  SessionPtr s = std::move(it->second);
  by_id_.erase(it);
  unindex_locked(*s);
  return s;
}

SessionPtr SessionIndex::by_id(const std::string& id) const {
  std::shared_lock lock(mu_);
  return find_in(by_id_, id);
}

SessionPtr SessionIndex::by_guest_ip4(in_addr addr) const {
  std::shared_lock lock(mu_);
  return find_in(by_ip4_, addr.s_addr);
}

SessionPtr SessionIndex::by_guest_ip6(const in6_addr& addr) const {
  std::shared_lock lock(mu_);
  return find_in(by_ip6_, key_of(addr));
}

SessionPtr SessionIndex::by_ifindex(int ifindex) const {
  std::shared_lock lock(mu_);
  return find_in(by_ifindex_, ifindex);
}

SessionPtr SessionIndex::by_session_idx(uint32_t idx) const {
  std::shared_lock lock(mu_);
  return find_in(by_idx_, idx);
}

std::vector<SessionPtr> SessionIndex::all() const {
  std::shared_lock lock(mu_);
  std::vector<SessionPtr> out;
  out.reserve(by_id_.size());
  for (const auto& [id, s] : by_id_) out.push_back(s);
  return out;
}

size_t SessionIndex::size() const {
  std::shared_lock lock(mu_);
  return by_id_.size();
}

}  // namespace zn::broker
