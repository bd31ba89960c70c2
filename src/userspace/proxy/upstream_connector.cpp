#include "userspace/proxy/upstream_connector.h"

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include "userspace/net/asio_endpoint.h"

namespace zn::proxy {

using namespace asio::experimental::awaitable_operators;

asio::awaitable<UpstreamConnection> connect_upstream(const std::vector<net::IpAddress>& addresses,
                                                     uint16_t port, const DestinationGuard* guard,
                                                     std::chrono::steady_clock::duration timeout,
                                                     const UpstreamHandshake& handshake) {
  constexpr auto as_tuple = asio::experimental::as_tuple(asio::use_awaitable);
  auto executor = co_await asio::this_coro::executor;
  UpstreamConnection out;
  out.last_error = "no address";
  for (const net::IpAddress& a : addresses) {
    std::optional<std::string> why =
        guard ? guard->refusal(a) : std::optional<std::string>("no destination guard");
    if (why) {
      out.refused = *why;
      continue;
    }
    out.attempted = true;
    auto socket = std::make_unique<asio::ip::tcp::socket>(executor);
    asio::steady_timer deadline(executor, timeout);
    auto r = co_await (socket->async_connect(net::endpoint_of(a, port), as_tuple) ||
                       deadline.async_wait(as_tuple));
    if (r.index() != 0) {
      out.last_error = "connect timed out";
      continue;
    }
    if (auto [ec] = std::get<0>(r); ec) {
      out.last_error = ec.message();
      continue;
    }
    const std::string upstream = upstream_text(a, port);
    if (handshake) {
      if (std::optional<std::string> failed = co_await handshake(*socket, upstream)) {
        out.last_error = *failed;
        continue;
      }
    }
    out.socket = std::move(socket);
    out.upstream = upstream;
    co_return out;
  }
  co_return out;
}

}  // namespace zn::proxy
