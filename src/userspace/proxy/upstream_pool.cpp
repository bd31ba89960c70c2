#include "userspace/proxy/upstream_pool.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace zn::proxy {
namespace {

// Open, and nothing to read: an idle HTTP/1.1 server sends nothing between
// responses (a TLS close_notify, a late byte or EOF all mean "do not reuse").
bool quiet(asio::ip::tcp::socket& s) {
  char byte;
  const ssize_t n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

}  // namespace

std::optional<IdleUpstream> UpstreamPool::take(const UpstreamKey& key, const asio::any_io_executor& loop,
                                               Clock::time_point now) {
  std::vector<IdleUpstream> dropped;  // closed outside the lock
  std::optional<IdleUpstream> found;
  {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (now - it->since >= config_.idle) {
        dropped.push_back(std::move(it->up));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
    // Newest first: the least likely to have been closed by the server.
    for (size_t i = entries_.size(); i-- > 0;) {
      if (!(entries_[i].key == key) || entries_[i].up.socket->get_executor() != loop) continue;
      IdleUpstream up = std::move(entries_[i].up);
      entries_.erase(entries_.begin() + static_cast<long>(i));
      if (quiet(*up.socket)) {
        found = std::move(up);
        break;
      }
      dropped.push_back(std::move(up));
    }
  }
  return found;
}

void UpstreamPool::give(UpstreamKey key, IdleUpstream up, Clock::time_point now) {
  std::vector<IdleUpstream> dropped;
  std::lock_guard lock(mu_);
  size_t same = 0;
  for (const Entry& e : entries_) same += e.key == key;
  if (same >= config_.per_key) {
    auto oldest =
        std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
    dropped.push_back(std::move(oldest->up));
    entries_.erase(oldest);
  }
  if (entries_.size() >= config_.total) {
    dropped.push_back(std::move(entries_.front().up));
    entries_.pop_front();
  }
  entries_.push_back(Entry{std::move(key), std::move(up), now});
}

size_t UpstreamPool::drop_session(const std::string& session) {
  std::vector<IdleUpstream> dropped;  // closed outside the lock
  std::lock_guard lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->key.session != session) {
      ++it;
      continue;
    }
    dropped.push_back(std::move(it->up));
    it = entries_.erase(it);
  }
  return dropped.size();
}

void UpstreamPool::clear() {
  std::deque<Entry> all;
  {
    std::lock_guard lock(mu_);
    all.swap(entries_);
  }
}

size_t UpstreamPool::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace zn::proxy
