#include "userspace/proxy/byte_stream.h"

#include <openssl/err.h>

#include <algorithm>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>

#include <stdexcept>

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;

std::string openssl_reason(const char* what, SSL* ssl) {
  unsigned long e = ERR_get_error();
  std::string out = what;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += ": ";
    out += buf;
  }
  if (ssl != nullptr) {
    long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) {
      out += " (certificate: ";
      out += X509_verify_cert_error_string(v);
      out += ")";
    }
  }
  ERR_clear_error();
  return out;
}

}  // namespace

awaitable<void> wait_for_signal(std::optional<asio::steady_timer>& signal) {
  if (!signal) signal.emplace(co_await asio::this_coro::executor);
  signal->expires_at(asio::steady_timer::time_point::max());
  co_await signal->async_wait(asio::experimental::as_tuple(use_awaitable));
  // Woken (a cancel) or cancelled by the caller: only the caller's
  // cancellation ends the wait for good.
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none)
    throw std::system_error(std::make_error_code(std::errc::operation_canceled));
}

// Both waits are plain asynchronous operations in one parallel group: no
// coroutine is spawned (awaitable operators spawn one per operand, and
// these waits run once per read on every connection).
awaitable<bool> ByteStream::wait_readable(std::chrono::steady_clock::duration timeout) {
  if (has_buffered()) co_return true;
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto [order, readable, expired] =
      co_await asio::experimental::make_parallel_group(
          socket().async_wait(asio::ip::tcp::socket::wait_read, asio::experimental::deferred),
          timer.async_wait(asio::experimental::deferred))
          .async_wait(asio::experimental::wait_for_one(), use_awaitable);
  (void)expired;
  co_return order[0] == 0 && !readable;
}

awaitable<Woke> wait_readable_or_signal(ByteStream& stream, asio::steady_timer& signal,
                                        std::chrono::steady_clock::duration timeout) {
  if (stream.has_buffered()) co_return Woke::kReadable;
  signal.expires_after(timeout);
  auto [order, readable, expired] =
      co_await asio::experimental::make_parallel_group(
          stream.socket().async_wait(asio::ip::tcp::socket::wait_read, asio::experimental::deferred),
          signal.async_wait(asio::experimental::deferred))
          .async_wait(asio::experimental::wait_for_one(), use_awaitable);
  // A failed socket shows as readable: the read that follows reports it.
  if (order[0] == 0)
    co_return readable == asio::error::operation_aborted ? Woke::kSignalled : Woke::kReadable;
  co_return expired ? Woke::kSignalled : Woke::kTimedOut;
}

awaitable<size_t> PlainStream::read_some(char* data, size_t size) {
  auto [ec, n] =
      co_await socket_.async_read_some(asio::buffer(data, size), asio::experimental::as_tuple(use_awaitable));
  if (ec == asio::error::eof) co_return 0;
  if (ec) throw std::system_error(ec);
  co_return n;
}

awaitable<void> PlainStream::write_all(std::string_view data) {
  co_await asio::async_write(socket_, asio::buffer(data), use_awaitable);
}

awaitable<void> PlainStream::close_write() {
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  co_return;
}

TlsStream::TlsStream(asio::ip::tcp::socket& socket, SslPtr ssl, bool server, std::string_view prefix)
    : socket_(socket), ssl_(std::move(ssl)) {
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  if (in_ == nullptr || out_ == nullptr) {
    BIO_free(in_);
    BIO_free(out_);
    throw std::bad_alloc();
  }
  // EOF of the socket is signalled by the empty-read return of the BIO only
  // once we mark it; until then an empty BIO means "retry".
  BIO_set_mem_eof_return(in_, -1);
  SSL_set_bio(ssl_.get(), in_, out_);
  if (server)
    SSL_set_accept_state(ssl_.get());
  else
    SSL_set_connect_state(ssl_.get());
  if (!prefix.empty()) BIO_write(in_, prefix.data(), static_cast<int>(prefix.size()));
}

awaitable<void> TlsStream::flush() {
  // Another flush is writing: it takes what is in the BIO until it is empty,
  // ours included; waited for, so a writer is held back by the socket as ever.
  while (flushing_) co_await wait_for_signal(flushed_);
  flushing_ = true;
  struct Done {
    TlsStream& s;
    ~Done() {
      s.flushing_ = false;
      if (s.flushed_) s.flushed_->cancel();
    }
  } done{*this};
  // What is pending goes in one send (up to 64 KiB of records: a 64 KiB
  // write was four sends of 16 KiB), from a buffer held only while it goes.
  constexpr size_t kMaxWireWrite = 64 * 1024 + 4 * 256;
  for (;;) {
    const size_t pending = std::min(BIO_ctrl_pending(out_), kMaxWireWrite);
    if (pending == 0) co_return;
    std::unique_ptr<char[]> wire(new char[pending]);
    const int n = BIO_read(out_, wire.get(), static_cast<int>(pending));
    if (n <= 0) co_return;
    co_await asio::async_write(socket_, asio::buffer(wire.get(), static_cast<size_t>(n)), use_awaitable);
  }
}

awaitable<bool> TlsStream::fill() {
  char buf[16384];
  auto [ec, n] =
      co_await socket_.async_read_some(asio::buffer(buf), asio::experimental::as_tuple(use_awaitable));
  if (ec == asio::error::eof) {
    BIO_set_mem_eof_return(in_, 0);
    co_return false;
  }
  if (ec) throw std::system_error(ec);
  BIO_write(in_, buf, static_cast<int>(n));
  co_return true;
}

awaitable<void> TlsStream::handshake() {
  for (;;) {
    ERR_clear_error();
    int r = SSL_do_handshake(ssl_.get());
    co_await flush();  // alerts too: the peer should learn why
    if (r == 1) co_return;
    int err = SSL_get_error(ssl_.get(), r);
    if (err != SSL_ERROR_WANT_READ)
      throw std::runtime_error(openssl_reason("TLS handshake failed", ssl_.get()));
    const bool more = co_await fill();
    if (!more) throw std::runtime_error("TLS handshake: peer closed");
  }
}

awaitable<size_t> TlsStream::read_some(char* data, size_t size) {
  for (;;) {
    ERR_clear_error();
    size_t n = 0;
    int r = SSL_read_ex(ssl_.get(), data, size, &n);
    if (r == 1) co_return n;
    int err = SSL_get_error(ssl_.get(), r);
    co_await flush();  // a key update or alert may need sending
    if (err == SSL_ERROR_ZERO_RETURN) co_return 0;
    if (err != SSL_ERROR_WANT_READ) throw std::runtime_error(openssl_reason("TLS read failed", nullptr));
    // A TCP end without close_notify is a truncation, not an end of stream.
    const bool more = co_await fill();
    if (!more) throw std::runtime_error("TLS stream truncated");
  }
}

awaitable<void> TlsStream::write_all(std::string_view data) {
  while (!data.empty()) {
    ERR_clear_error();
    size_t n = 0;
    // Memory BIOs never block: bound what is buffered by flushing per record batch.
    const size_t chunk = std::min<size_t>(data.size(), 64 * 1024);
    if (SSL_write_ex(ssl_.get(), data.data(), chunk, &n) != 1)
      throw std::runtime_error(openssl_reason("TLS write failed", nullptr));
    data.remove_prefix(n);
    co_await flush();
  }
}

awaitable<void> TlsStream::close_write() {
  ERR_clear_error();
  SSL_shutdown(ssl_.get());
  co_await flush();
  asio::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
}

bool TlsStream::has_buffered() const { return SSL_pending(ssl_.get()) > 0 || BIO_ctrl_pending(in_) > 0; }

}  // namespace zn::proxy
