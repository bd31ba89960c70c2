// The guest's side of an exchange on an HTTP/1.1 connection (guest_leg.h):
// request heads parsed from the connection's bytes one after another
// (keep-alive; nothing pipelined behind a refusal is ever read as a
// request), bodies decoded from their framing, and responses written as
// HTTP/1.1 text with framing the proxy regenerates (chunked when the
// upstream's length is unknown and the guest speaks HTTP/1.1).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "userspace/http/body.h"
#include "userspace/proxy/guest_leg.h"
#include "userspace/proxy/proxy_io.h"
#include "userspace/proxy/watchdog.h"

namespace zn::proxy {

struct H1Timeouts {
  std::chrono::milliseconds header;  // a started request head must complete in this
  std::chrono::milliseconds idle;    // keep-alive wait and any stalled transfer
};

class H1GuestLeg final : public GuestLeg {
 public:
  // `dog`: the watchdog of the thread the leg is used in (watchdog.h).
  H1GuestLeg(ByteStream& guest, const http::HttpLimits& limits, H1Timeouts timeouts, const Watchdog& dog);

  asio::awaitable<HeadIn> next_head(http::RequestHead& head) override;
  const std::string& input() const override { return in_; }
  size_t head_bytes() const override { return head_bytes_; }
  void release_head() override;
  asio::awaitable<std::string> preview_body(const http::RequestHead& head, size_t n,
                                            std::chrono::steady_clock::duration patience) override;
  asio::awaitable<bool> read_body(const http::RequestHead& head, std::string& out) override;

  bool watches_end() const override { return true; }
  asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout) override;
  asio::awaitable<bool> read_ahead() override;
  size_t held() const override { return in_.size(); }

  asio::awaitable<void> send_continue() override;
  bool response_head(const http::ResponseHead& head, bool close) override;
  void response_data(std::string_view bytes) override;
  void response_end(const std::vector<http::Header>& trailers) override;
  asio::awaitable<size_t> flush() override;
  bool response_started() const override { return started_; }
  asio::awaitable<void> answer(const ProxyAnswer& answer, const http::RequestHead* head, bool close) override;
  asio::awaitable<void> close() override;

  asio::awaitable<ByteStream*> open_tunnel(const http::ResponseHead& head, std::string& pending) override;

  bool failed() const override { return stream_.failed(); }
  void forget() override { stream_.forget(); }

 private:
  // The guest's connection, remembering whether it failed: a read or write
  // threw (a reset, a stalled guest past its deadline) or the guest ended
  // its side.
  class Tracked final : public ByteStream {
   public:
    explicit Tracked(ByteStream& s) : s_(s) {}
    asio::awaitable<size_t> read_some(char* data, size_t size) override;
    asio::awaitable<void> write_all(std::string_view data) override;
    asio::awaitable<void> close_write() override { return s_.close_write(); }
    asio::ip::tcp::socket& socket() override { return s_.socket(); }
    bool has_buffered() const override { return s_.has_buffered(); }
    asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout) override {
      return s_.wait_readable(timeout);
    }
    bool failed() const { return failed_; }
    void forget() { failed_ = false; }

   private:
    ByteStream& s_;
    bool failed_ = false;
  };

  // One read of the guest into in_ (bounded by the idle timeout); false at its end.
  asio::awaitable<bool> read_more();

  Tracked stream_;
  http::HttpLimits limits_;
  H1Timeouts timeouts_;
  const Watchdog& dog_;
  std::string in_;
  size_t head_bytes_ = 0;  // the current head's, at the front of in_ until released
  bool guest_11_ = true;   // the current request's version is HTTP/1.1
  // The body being read (started by the first read, kept to its end).
  std::optional<http::BodyDecoder> decoder_;
  // The response being written.
  std::string pending_;
  bool chunked_ = false;
  bool started_ = false;
  char buf_[kReadChunk];
};

}  // namespace zn::proxy
