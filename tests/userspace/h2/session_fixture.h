// Drives a session under test against an NgPeer: bytes both ways until
// neither has anything to write, the session's events collected.
#pragma once

#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "h2_peer.h"
#include "userspace/h2/client_session.h"
#include "userspace/h2/server_session.h"

namespace zn::h2::test {

inline std::span<const uint8_t> bytes_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Every event of type T in `events`, in order.
template <typename T, typename Events>
std::vector<T> of(const Events& events) {
  std::vector<T> out;
  for (const auto& e : events)
    if (const T* t = std::get_if<T>(&e)) out.push_back(*t);
  return out;
}

template <typename Session, typename Event>
struct Exchange {
  // The last feed()'s result (ok until one fails).
  Result fed;
  std::vector<Event> events;

  void pump(Session& session, NgPeer& peer) {
    for (int round = 0; round < 10000; ++round) {
      const std::string to_session = peer.take_output();
      if (!to_session.empty() && fed.ok) fed = session.feed(bytes_of(to_session));
      collect(session);
      const std::string to_peer = session.take_output();
      collect(session);
      if (!to_peer.empty()) peer.feed(to_peer);
      if (to_session.empty() && to_peer.empty()) return;
    }
    ADD_FAILURE() << "the exchange never settled";
  }
  void collect(Session& session) {
    for (auto& e : session.take_events()) events.push_back(std::move(e));
  }
};

using ServerExchange = Exchange<H2ServerSession, ServerEvent>;
using ClientExchange = Exchange<H2ClientSession, ClientEvent>;

inline Fields get_request(const std::string& path = "/", const std::string& authority = "example.com") {
  return {{":method", "GET"}, {":scheme", "https"}, {":authority", authority}, {":path", path}};
}

}  // namespace zn::h2::test
