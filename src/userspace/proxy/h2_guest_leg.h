// The guest's side of an exchange on one HTTP/2 stream (guest_leg.h): the
// request is the head the codec's checked fields made (h2/stream_request.h)
// and the stream's DATA as it comes; the answer goes to the codec as fields,
// DATA and trailers. No HTTP/1.1 text is written or parsed on the way (the
// head is written out once as text for the tripwire screen to read).
//
// The connection (h2_intercept.cpp) owns the session and the guest's
// socket: it pushes DATA in, ends or aborts the request, and writes out
// what the stream's answer put in the session whenever it is kicked. Every
// wait is on the connection's one I/O loop and honours the caller's
// cancellation, so the exchange's deadlines work as on a socket.
//
// A WebSocket (extended CONNECT, RFC 8441) whose upstream switched turns the
// leg into a byte tunnel (it is the ByteStream the relay reads and writes).
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "userspace/h2/server_session.h"
#include "userspace/proxy/guest_leg.h"
#include "userspace/proxy/unsent_budget.h"
#include "userspace/proxy/watchdog.h"

namespace zn::proxy {

class H2GuestLeg final : public GuestLeg, public ByteStream {
 public:
  // `head`: the stream's request (to_request_head); `kick`: asks the
  // connection to write out what the session holds. `budget`: the
  // connection's, for the response bytes its streams hold unsent (the
  // guest's windows shut): without room a writer waits, as on a socket the
  // guest does not read.
  H2GuestLeg(h2::H2ServerSession& session, int32_t stream_id, std::function<void()> kick,
             asio::ip::tcp::socket& socket, http::RequestHead head, std::chrono::milliseconds idle_timeout,
             const Watchdog& dog, UnsentBudget& budget);
  ~H2GuestLeg() override;
  H2GuestLeg(const H2GuestLeg&) = delete;
  H2GuestLeg& operator=(const H2GuestLeg&) = delete;

  // ---- The connection's side ----
  void push(std::string data);  // the stream's next DATA payload
  void end_request();           // END_STREAM (or trailers): reads end once what was pushed is taken
  void abort();                 // the stream is gone: waits end, reads and writes throw
  void wake();                  // the guest took response bytes: a held-back writer goes on
  // Drops what was pushed and not taken; how many payload bytes (given back
  // to the connection's window when the stream goes).
  size_t drop_pending();
  bool response_complete() const { return state_ == State::kDone; }
  int32_t id() const { return id_; }

  // ---- GuestLeg ----
  asio::awaitable<HeadIn> next_head(http::RequestHead& head) override;
  const std::string& input() const override { return text_; }
  size_t head_bytes() const override { return text_.size(); }
  void release_head() override {}
  asio::awaitable<std::string> preview_body(const http::RequestHead& head, size_t n,
                                            std::chrono::steady_clock::duration patience) override;
  asio::awaitable<bool> read_body(const http::RequestHead& head, std::string& out) override;
  bool watches_end() const override { return false; }
  asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout) override;
  asio::awaitable<bool> read_ahead() override { co_return !aborted_; }
  size_t held() const override { return 0; }
  asio::awaitable<void> send_continue() override { co_return; }
  bool response_head(const http::ResponseHead& head, bool close) override;
  void response_data(std::string_view bytes) override;
  void response_end(const std::vector<http::Header>& trailers) override;
  asio::awaitable<size_t> flush() override;
  bool response_started() const override { return state_ != State::kHead; }
  asio::awaitable<void> answer(const ProxyAnswer& answer, const http::RequestHead* head, bool close) override;
  asio::awaitable<void> close() override { co_return; }
  asio::awaitable<ByteStream*> open_tunnel(const http::ResponseHead& head, std::string& pending) override;
  bool failed() const override { return aborted_; }
  void forget() override {}

  // ---- ByteStream: the tunnel of a switched WebSocket ----
  asio::awaitable<size_t> read_some(char* data, size_t size) override;
  asio::awaitable<void> write_all(std::string_view data) override;
  asio::awaitable<void> close_write() override;
  asio::ip::tcp::socket& socket() override { return socket_; }
  bool has_buffered() const override { return !in_.empty() || ended_ || aborted_; }
  bool end_means_peer_gone() const override { return false; }

 private:
  enum class State { kHead, kBody, kTunnel, kDone };
  void notify();
  // Waits for something to read (or the request's end); throws once aborted.
  asio::awaitable<void> wait_for_data();
  // Takes up to `size` bytes of what was pushed; gives their window back.
  size_t take(char* data, size_t size);
  void take_all(std::string& out);
  // Moves to `state`: a body or a tunnel is counted in the budget's share.
  void enter(State state);
  // Whether the stream may add more (UnsentBudget::room).
  bool room();
  // Waits until it may; throws once aborted.
  asio::awaitable<void> wait_room();

  h2::H2ServerSession& session_;
  int32_t id_;
  std::function<void()> kick_;
  asio::ip::tcp::socket& socket_;
  std::optional<http::RequestHead> head_;  // until next_head hands it over
  std::string text_;                       // the head as HTTP/1.1 lines, for the screen
  std::string method_;
  uint64_t content_length_ = 0;
  bool has_length_ = false;
  std::chrono::milliseconds idle_;
  const Watchdog& dog_;  // of the stream's exchange's thread
  UnsentBudget& budget_;

  std::deque<std::string> in_;  // DATA payloads not taken
  size_t front_taken_ = 0;      // of in_.front()
  uint64_t received_ = 0;       // body bytes pushed in all
  bool ended_ = false;
  bool aborted_ = false;
  // Waits until push(), end_request(), abort() or wake(). A reader and a
  // writer may wait at once (a tunnel's relay): each on its own timer.
  std::optional<asio::steady_timer> read_signal_, write_signal_;

  State state_ = State::kHead;
  bool body_ = false;  // DATA follows the response's HEADERS
  size_t given_ = 0;   // response bytes handed to the session since the last flush
};

}  // namespace zn::proxy
