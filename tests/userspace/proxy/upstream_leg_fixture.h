// What the upstream legs' tests share (h1_upstream_leg_test.cpp,
// h2_upstream_leg_test.cpp): a request as the exchange hands it over, and
// running a client coroutine over a leg on a connected loopback socket.
#pragma once

#include <gtest/gtest.h>

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

#include "userspace/http/injection.h"
#include "userspace/http/message.h"
#include "userspace/http/target.h"
#include "userspace/proxy/upstream_leg.h"

namespace zn::proxy::legtest {

// A request from its HTTP/1.1 head, as the exchange hands it over.
struct TestRequest {
  http::RequestHead head;
  http::NormalisedTarget target;
  std::string host = "up.example";
  http::Injection injection;
  bool inject = false;
  OutgoingRequest out() const { return {head, target, host, inject ? &injection : nullptr, false, false}; }
};

inline TestRequest test_request(const std::string& text) {
  TestRequest r;
  const http::ParseResult p = http::parse_request_head(text, http::HttpLimits{}, r.head);
  if (p.state != http::ParseState::kDone) throw std::runtime_error("bad test head: " + p.error);
  r.target = *http::normalise_target(r.head.target);
  return r;
}

// Runs `client` over `leg` on `io` until it finishes (at most 10 s), then
// closes `socket` (the leg's); rethrows what the client threw.
template <typename Leg>
void run_over_leg(asio::io_context& io, asio::ip::tcp::socket& socket, Leg& leg,
                  const std::function<asio::awaitable<void>(Leg&)>& client) {
  bool done = false;
  std::exception_ptr failed;
  asio::co_spawn(io, client(leg), [&](std::exception_ptr e) {
    failed = e;
    done = true;
    asio::error_code ignored;
    socket.close(ignored);
  });
  io.run_for(std::chrono::seconds(10));
  ASSERT_TRUE(done) << "the client never finished";
  if (failed) std::rethrow_exception(failed);
}

}  // namespace zn::proxy::legtest
