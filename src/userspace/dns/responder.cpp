#include "userspace/dns/responder.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <asio.hpp>
#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/thread_name.h"
#include "userspace/net/transparent_socket.h"

namespace zn::dns {
namespace {

// Lets resolver callbacks, which may fire on other threads and after the
// responder is gone, post into the loop only while it is alive.
struct Gate {
  std::mutex mutex;
  bool alive = true;
  asio::io_context* io = nullptr;
};

struct UdpListener {
  asio::ip::udp::socket socket;
  sockaddr_storage addr;
};

asio::ip::udp udp_protocol(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? asio::ip::udp::v4() : asio::ip::udp::v6();
}
asio::ip::tcp tcp_protocol(const sockaddr_storage& a) {
  return a.ss_family == AF_INET ? asio::ip::tcp::v4() : asio::ip::tcp::v6();
}

}  // namespace

struct Responder::Impl {
  ResponderConfig config;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  // Declared before io: coroutine frames destroyed with io still touch it.
  std::atomic<size_t> tcp_connections{0};
  DnsPolicy& policy;
  // Open TCP connections by session ("": sources of none); the loop's only.
  std::unordered_map<std::string, size_t> tcp_per_session;
  asio::io_context io{1};
  // Declared after io, destroyed before it: pending resolutions hold
  // completion handlers of coroutines that belong to io.
  QueryHandler handler;
  std::vector<std::unique_ptr<UdpListener>> udp;
  std::vector<std::unique_ptr<asio::ip::tcp::acceptor>> tcp;
  uint16_t port = 0;
  std::thread thread;

  Impl(ResponderConfig cfg, DnsPolicy& policy, Resolver& resolver)
      : config(std::move(cfg)),
        policy(policy),
        handler(policy, resolver, config.handler, [g = gate](std::function<void()> task) {
          std::lock_guard lock(g->mutex);
          if (g->alive) asio::post(*g->io, std::move(task));
        }) {
    gate->io = &io;
  }

  // Every address's UDP and TCP listener on one port (port 0: the number the
  // first UDP socket picked).
  void open() {
    port = net::open_on_one_port(
        config.port, [this](uint16_t wanted) { return open_on(wanted); },
        [this] {
          udp.clear();
          tcp.clear();
        });
  }

  uint16_t open_on(uint16_t number) {
    for (const auto& address : config.addresses) {
      sockaddr_storage addr = net::make_endpoint(address, number);
      int ufd = net::open_transparent_listener(addr, SOCK_DGRAM);
      if (number == 0) {
        number = net::bound_port(ufd);
        addr = net::make_endpoint(address, number);
      }
      auto l = std::make_unique<UdpListener>(UdpListener{asio::ip::udp::socket(io), addr});
      l->socket.assign(udp_protocol(addr), ufd);
      udp.push_back(std::move(l));
      int tfd = net::open_transparent_listener(addr, SOCK_STREAM);
      auto a = std::make_unique<asio::ip::tcp::acceptor>(io);
      a->assign(tcp_protocol(addr), tfd);
      tcp.push_back(std::move(a));
    }
    return number;
  }

  void start() {
    for (auto& l : udp) asio::co_spawn(io, udp_loop(*l), asio::detached);
    for (auto& a : tcp) asio::co_spawn(io, accept_loop(*a), asio::detached);
    thread = std::thread([this] {
      set_thread_name("zn-dns");
      for (;;) {  // a handler that throws must not end the service
        try {
          io.run();
          return;  // stopped
        } catch (const std::exception& e) {
          spdlog::error("dns responder loop: {}", e.what());
        } catch (...) {
          spdlog::error("dns responder loop: unknown exception");
        }
      }
    });
  }

  void stop() {
    {
      std::lock_guard lock(gate->mutex);
      gate->alive = false;
    }
    io.stop();
    if (thread.joinable()) thread.join();
  }

  asio::awaitable<void> udp_loop(UdpListener& l) {
    std::vector<uint8_t> buf(65536);
    const int fd = l.socket.native_handle();
    for (;;) {
      asio::error_code ec;
      co_await l.socket.async_wait(asio::socket_base::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !l.socket.is_open()) co_return;
      for (int budget = 64; budget > 0; --budget) {
        auto d = net::receive_datagram(fd, buf);
        if (!d) break;
        const sockaddr_storage source = d->source;
        // No original destination (should not happen): answer from the listener.
        const sockaddr_storage from = d->original_dst.ss_family ? d->original_dst : l.addr;
        handler.handle(std::span<const uint8_t>(buf.data(), d->size), source, Transport::Udp,
                       [this, &l, source, from](std::optional<Bytes> reply) {
                         if (!reply) return;
                         if (!net::send_datagram_from(l.socket.native_handle(), l.addr, from, source, *reply))
                           ++handler.counters().send_errors;
                       });
      }
    }
  }

  asio::awaitable<void> accept_loop(asio::ip::tcp::acceptor& acceptor) {
    asio::steady_timer backoff(io);
    for (;;) {
      asio::error_code ec;
      asio::ip::tcp::socket sock =
          co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) {  // e.g. EMFILE: do not spin
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      if (tcp_connections.load() >= config.max_tcp_connections) {
        ++handler.counters().tcp_rejected;
        sock.close(ec);
        continue;
      }
      // The peer, read once: its session here, its queries' source after.
      sockaddr_storage peer{};
      socklen_t len = sizeof(peer);
      if (::getpeername(sock.native_handle(), reinterpret_cast<sockaddr*>(&peer), &len) < 0) {
        sock.close(ec);  // gone already
        continue;
      }
      std::string session = session_of(peer);
      if (auto it = tcp_per_session.find(session);
          it != tcp_per_session.end() && it->second >= config.max_tcp_per_session) {
        ++handler.counters().tcp_rejected;
        sock.close(ec);
        continue;
      }
      ++tcp_connections;
      ++tcp_per_session[session];
      asio::co_spawn(io, tcp_connection(std::move(sock), peer, std::move(session)), asio::detached);
    }
  }

  // The session of a connection's peer; "" for none.
  std::string session_of(const sockaddr_storage& peer) {
    try {
      if (auto s = policy.session_of(peer)) return s->id;
    } catch (const std::exception&) {
      // The policy's failure: counted with the sources of no session.
    }
    return "";
  }

  struct Connection {
    explicit Connection(asio::ip::tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
    std::chrono::steady_clock::time_point deadline;
    bool done = false;
  };

  // Closes the connection once its deadline passes without progress.
  static asio::awaitable<void> watchdog(std::shared_ptr<Connection> c) {
    while (!c->done) {
      if (std::chrono::steady_clock::now() >= c->deadline) {
        asio::error_code ec;
        c->socket.close(ec);
        co_return;
      }
      c->timer.expires_at(c->deadline);
      asio::error_code ec;
      co_await c->timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  // Runs one query through the handler; completes on the loop, never inline.
  asio::awaitable<std::optional<Bytes>> answer(std::span<const uint8_t> msg, const sockaddr_storage& source) {
    return asio::async_initiate<decltype(asio::use_awaitable), void(std::optional<Bytes>)>(
        [this, msg, source](auto completion) {
          auto shared = std::make_shared<decltype(completion)>(std::move(completion));
          handler.handle(msg, source, Transport::Tcp, [this, shared](std::optional<Bytes> r) {
            asio::post(io, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
          });
        },
        asio::use_awaitable);
  }

  asio::awaitable<void> tcp_connection(asio::ip::tcp::socket sock, sockaddr_storage peer,
                                       std::string session) {
    struct Release {
      Impl& impl;
      std::string session;
      ~Release() {
        --impl.tcp_connections;
        auto it = impl.tcp_per_session.find(session);
        if (it != impl.tcp_per_session.end() && --it->second == 0) impl.tcp_per_session.erase(it);
      }
    } release{*this, std::move(session)};
    auto c = std::make_shared<Connection>(std::move(sock));
    c->deadline = std::chrono::steady_clock::now() + config.tcp_idle_timeout;
    asio::co_spawn(io, watchdog(c), asio::detached);

    for (;;) {
      c->deadline = std::chrono::steady_clock::now() + config.tcp_idle_timeout;
      asio::error_code ec;
      uint8_t prefix[2];
      co_await asio::async_read(c->socket, asio::buffer(prefix),
                                asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      const size_t size = (size_t{prefix[0]} << 8) | prefix[1];
      if (size < 12 || size > config.max_tcp_message) {
        ++handler.counters().queries;
        ++handler.counters().malformed;
        break;
      }
      Bytes msg(size);
      co_await asio::async_read(c->socket, asio::buffer(msg), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      std::optional<Bytes> reply = co_await answer(msg, peer);
      if (!reply) continue;
      if (reply->size() > 65535) break;
      const uint8_t out_prefix[2] = {static_cast<uint8_t>(reply->size() >> 8),
                                     static_cast<uint8_t>(reply->size() & 0xff)};
      std::array<asio::const_buffer, 2> out{asio::buffer(out_prefix), asio::buffer(*reply)};
      co_await asio::async_write(c->socket, out, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        ++handler.counters().send_errors;
        break;
      }
    }
    c->done = true;
    asio::error_code ignored;
    c->timer.cancel();
    c->socket.close(ignored);
  }
};

ResponderConfig responder_config_for(const dp::Listeners& listeners) {
  char v4[INET_ADDRSTRLEN] = "", v6[INET6_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &listeners.dns_ip4, v4, sizeof(v4));
  inet_ntop(AF_INET6, &listeners.dns_ip6, v6, sizeof(v6));
  ResponderConfig config;
  config.addresses = {v4, v6};
  config.port = listeners.dns_port;
  return config;
}

Responder::Responder(ResponderConfig config, DnsPolicy& policy, Resolver& resolver)
    : impl_(std::make_unique<Impl>(std::move(config), policy, resolver)) {
  impl_->open();  // throws before the thread starts: nothing to stop
  impl_->start();
}

Responder::~Responder() { impl_->stop(); }

uint16_t Responder::port() const { return impl_->port; }

std::vector<int> Responder::tcp_listener_fds() const {
  std::vector<int> fds;
  for (const auto& a : impl_->tcp) fds.push_back(a->native_handle());
  return fds;
}

DnsCountersSnapshot Responder::counters() const { return impl_->handler.counters().snapshot(); }

size_t Responder::tcp_connections() const { return impl_->tcp_connections.load(); }

}  // namespace zn::dns
