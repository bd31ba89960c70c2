// A byte stream the HTTP exchange reads and writes without caring whether
// TLS is under it: a plain TCP socket, or OpenSSL driven over memory BIOs
// on that socket. Memory BIOs (rather than an SSL on the fd) let bytes
// already read — the ClientHello the proxy peeked — be fed in first, and
// keep every wait on the event loop.
#pragma once

#include <openssl/ssl.h>

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "userspace/tls/contexts.h"

namespace zn::proxy {

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // 0 at an orderly end of stream; throws std::system_error on failure.
  virtual asio::awaitable<size_t> read_some(char* data, size_t size) = 0;
  virtual asio::awaitable<void> write_all(std::string_view data) = 0;
  // Orderly end of what we send (TLS close_notify, then FIN).
  virtual asio::awaitable<void> close_write() = 0;
  virtual asio::ip::tcp::socket& socket() = 0;
  // Bytes read from the socket and not yet returned by read_some (TLS:
  // records already in the memory BIO, or decrypted and pending), which the
  // socket's readability does not show.
  virtual bool has_buffered() const { return false; }
  // Waits until a read would not block (has_buffered, or the socket is
  // readable) or `timeout` passes; false on the timeout. Never takes a byte:
  // a read cut off by a timer could drop bytes it already took.
  virtual asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout);
  // Whether read_some's 0 says the peer went (a connection's end). An
  // HTTP/2 stream's pipe ends its reads with its request instead; a guest
  // that gives up on the stream aborts it.
  virtual bool end_means_peer_gone() const { return true; }
};

class PlainStream : public ByteStream {
 public:
  explicit PlainStream(asio::ip::tcp::socket& socket) : socket_(socket) {}
  asio::awaitable<size_t> read_some(char* data, size_t size) override;
  asio::awaitable<void> write_all(std::string_view data) override;
  asio::awaitable<void> close_write() override;
  asio::ip::tcp::socket& socket() override { return socket_; }

 private:
  asio::ip::tcp::socket& socket_;
};

class TlsStream : public ByteStream {
 public:
  // ssl: configured for its role (leaf set for a server, host and
  // verification for a client); takes ownership. `prefix`: bytes already
  // read from the socket that belong to the TLS stream.
  TlsStream(asio::ip::tcp::socket& socket, SslPtr ssl, bool server, std::string_view prefix = {});
  // Throws std::runtime_error with OpenSSL's reason (never key material).
  asio::awaitable<void> handshake();
  asio::awaitable<size_t> read_some(char* data, size_t size) override;
  asio::awaitable<void> write_all(std::string_view data) override;
  asio::awaitable<void> close_write() override;
  asio::ip::tcp::socket& socket() override { return socket_; }
  bool has_buffered() const override;
  SSL* ssl() const { return ssl_.get(); }

 private:
  asio::awaitable<void> flush();
  asio::awaitable<bool> fill();  // false at EOF of the socket
  asio::ip::tcp::socket& socket_;
  // One flush at a time: a read (a key update's answer) and a write may
  // run at once (the WebSocket relay reads and writes a stream from two
  // coroutines), and two flushes would interleave their socket writes.
  bool flushing_ = false;
  std::optional<asio::steady_timer> flushed_;
  SslPtr ssl_;
  BIO* in_ = nullptr;   // owned by ssl_
  BIO* out_ = nullptr;  // owned by ssl_
};

// A steady_timer as a condition variable of one loop: sleeps until
// `signal` is cancelled (someone's notify: the caller looks again) or the
// caller itself is cancelled (its deadline, its parent), which throws
// std::system_error(operation_canceled).
asio::awaitable<void> wait_for_signal(std::optional<asio::steady_timer>& signal);

// What ended wait_readable_or_signal.
enum class Woke { kReadable, kSignalled, kTimedOut };

// Waits until `stream` would not block a read (ByteStream::wait_readable),
// `signal` is cancelled (someone's notify, as for wait_for_signal), or
// `timeout` passes. A connection's owner waits so for its peer or its
// streams. The caller's own cancellation ends the wait as kSignalled (its
// next co_await throws). `signal`'s expiry is the timeout: it must have no
// other waiter.
asio::awaitable<Woke> wait_readable_or_signal(ByteStream& stream, asio::steady_timer& signal,
                                              std::chrono::steady_clock::duration timeout);

namespace detail {
template <typename T>
struct Outcome {
  std::exception_ptr error;
  std::optional<T> value;
};
template <>
struct Outcome<void> {
  std::exception_ptr error;
};
// Asio's `||` waits for the first operation to *succeed*: a failure is
// turned into a value so that it ends the race too.
template <typename T>
asio::awaitable<Outcome<T>> capture(asio::awaitable<T> op) {
  Outcome<T> out;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(op);
    } else {
      T v = co_await std::move(op);
      out.value.emplace(std::move(v));
    }
  } catch (...) {
    out.error = std::current_exception();
  }
  co_return out;
}
}  // namespace detail

// `op` with a deadline: throws std::system_error(timed_out) when it passes
// (the operation is cancelled); `op`'s own failure is rethrown at once.
template <typename T>
asio::awaitable<T> with_deadline(asio::awaitable<T> op, std::chrono::steady_clock::duration timeout) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  // as_tuple: when `op` wins, the timer's wait is cancelled, and a plain
  // use_awaitable would throw operation_aborted to end it: an exception per
  // call (several per request), whose unwinding showed in the proxy's profile.
  auto r = co_await (detail::capture(std::move(op)) ||
                     timer.async_wait(asio::experimental::as_tuple(asio::use_awaitable)));
  if (r.index() == 1) throw std::system_error(std::make_error_code(std::errc::timed_out));
  detail::Outcome<T>& outcome = std::get<0>(r);
  if (outcome.error) std::rethrow_exception(outcome.error);
  if constexpr (!std::is_void_v<T>) co_return std::move(*outcome.value);
}

}  // namespace zn::proxy
