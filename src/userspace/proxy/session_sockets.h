// The sockets each session holds through the proxy, against its cap (issue
// 32): its guest connections and every upstream socket opened for them —
// a passthrough's, an intercepted connection's (also while it idles in the
// UpstreamPool), a shared HTTP/2 upstream connection's. Before, the cap
// counted guest connections by address only, and 8 HTTP/2 guest connections
// opened 256 upstream sockets uncounted.
//
// A Slot is one socket's place: taken before the socket exists, released
// when the Slot is destroyed (it goes with whatever owns the socket). Slots
// may outlive the SessionSockets that made them. Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zn::proxy {

class SessionSockets {
  struct State;

 public:
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept : state_(std::move(other.state_)), session_(std::move(other.session_)) {}
    Slot& operator=(Slot&& other) noexcept {
      if (this != &other) {
        release();
        state_ = std::move(other.state_);
        session_ = std::move(other.session_);
      }
      return *this;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { release(); }
    bool held() const { return state_ != nullptr; }
    // Whose place it is (as given to take()).
    const std::string& session() const { return session_; }
    void release();

   private:
    friend class SessionSockets;
    Slot(std::shared_ptr<State> state, std::string session)
        : state_(std::move(state)), session_(std::move(session)) {}
    std::shared_ptr<State> state_;
    std::string session_;
  };

  explicit SessionSockets(size_t per_session);

  // A place for one more socket of `session`; an empty Slot (held() false)
  // when the session holds its cap already.
  Slot take(const std::string& session);
  size_t held(const std::string& session) const;
  // Sessions holding a socket now (nothing is kept for the others).
  size_t sessions() const;
  size_t per_session() const { return per_session_; }

 private:
  struct State {
    std::mutex mu;
    std::unordered_map<std::string, size_t> held;
  };
  const size_t per_session_;
  std::shared_ptr<State> state_;
};

}  // namespace zn::proxy
