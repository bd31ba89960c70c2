#include "userspace/proxy/h2_upstream_shares.h"

#include <algorithm>

namespace zn::proxy {

void H2UpstreamShares::prune() {
  std::erase_if(entries_, [](const Entry& e) { return e.connection.expired(); });
}

std::shared_ptr<H2UpstreamConnection> H2UpstreamShares::find(const UpstreamKey& key,
                                                             const asio::any_io_executor& loop) {
  std::lock_guard lock(mu_);
  prune();
  // Newest first: the one most likely to have room.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->loop != loop || !(it->key == key)) continue;
    std::shared_ptr<H2UpstreamConnection> c = it->connection.lock();
    if (c && c->open_for_more()) return c;
  }
  return nullptr;
}

void H2UpstreamShares::add(UpstreamKey key, const std::shared_ptr<H2UpstreamConnection>& connection) {
  std::lock_guard lock(mu_);
  prune();
  entries_.push_back(Entry{std::move(key), connection->executor(), connection});
}

H2UpstreamShares::Join H2UpstreamShares::join(const UpstreamKey& key, const asio::any_io_executor& loop) {
  std::lock_guard lock(mu_);
  for (const std::shared_ptr<Connecting>& c : connecting_)
    if (c->loop == loop && c->key == key) return Join{false, c};
  auto c = std::make_shared<Connecting>();
  c->key = key;
  c->loop = loop;
  connecting_.push_back(c);
  return Join{true, std::move(c)};
}

void H2UpstreamShares::finish(const std::shared_ptr<Connecting>& connecting) {
  {
    std::lock_guard lock(mu_);
    std::erase(connecting_, connecting);
  }
  connecting->finished = true;
  if (connecting->signal) connecting->signal->cancel();
}

size_t H2UpstreamShares::size() {
  std::lock_guard lock(mu_);
  prune();
  return entries_.size();
}

}  // namespace zn::proxy
