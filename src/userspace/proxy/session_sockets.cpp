#include "userspace/proxy/session_sockets.h"

namespace zn::proxy {

void SessionSockets::Slot::release() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->held.find(session_);
    if (it != state_->held.end() && --it->second == 0) state_->held.erase(it);
  }
  state_.reset();
}

SessionSockets::SessionSockets(size_t per_session)
    : per_session_(per_session == 0 ? 1 : per_session), state_(std::make_shared<State>()) {}

SessionSockets::Slot SessionSockets::take(const std::string& session) {
  std::lock_guard lock(state_->mu);
  size_t& n = state_->held[session];
  if (n >= per_session_) return Slot{};  // n > 0 here: the entry was there
  ++n;
  return Slot(state_, session);
}

size_t SessionSockets::held(const std::string& session) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->held.find(session);
  return it == state_->held.end() ? 0 : it->second;
}

size_t SessionSockets::sessions() const {
  std::lock_guard lock(state_->mu);
  return state_->held.size();
}

}  // namespace zn::proxy
