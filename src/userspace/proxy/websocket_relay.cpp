#include "userspace/proxy/websocket_relay.h"
#include "userspace/proxy/lingering_close.h"
#include "userspace/proxy/loop_share.h"

#include <openssl/rand.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include <optional>

#include "userspace/websocket/frame.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace ws = zn::websocket;

// After a Close went one way, or one side ended its stream, the other has
// this long to finish.
constexpr Clock::duration kClosingGrace = 10s;
// The Close frames the proxy sends when it ends a WebSocket itself.
constexpr Clock::duration kCloseWrite = 2s;
// How long the proxy reads what a side still sends after its Close.
constexpr Clock::duration kDrain = 500ms;

class Relay {
 public:
  Relay(ByteStream& guest, ByteStream& upstream, const SecretScrubber& scrubber, const RequestScreen& screen,
        const std::vector<Substitution>& exempt, WebSocketChains chains, const WebSocketLimits& limits,
        const std::string& session)
      : guest_{guest, "guest"},
        upstream_{upstream, "upstream"},
        scrubber_(scrubber),
        screen_(screen),
        exempt_(exempt),
        limits_(limits),
        chains_(std::move(chains)),
        session_(session) {}

  awaitable<WebSocketOutcome> run(std::string guest_pending, std::string upstream_pending) {
    using namespace asio::experimental::awaitable_operators;
    signal_.emplace(co_await asio::this_coro::executor);
    last_activity_ = Clock::now();
    try {
      co_await ((pump(guest_, upstream_, std::move(guest_pending)) &&
                 pump(upstream_, guest_, std::move(upstream_pending))) ||
                watch());
      // Nothing runs any more: the sides that can still take a frame learn
      // why the proxy ended it.
      co_await send_close(guest_);
      co_await send_close(upstream_);
    } catch (const std::exception& e) {
      // Cancelled from outside (the guest's HTTP/2 connection went): what
      // was relayed is still the outcome.
      if (outcome_.end.empty()) outcome_.end = std::string("cancelled: ") + e.what();
    }
    if (outcome_.end.empty()) outcome_.end = "closed";
    chains_.up.close();
    chains_.down.close();  // what it scrubbed, into the audit record
    co_return std::move(outcome_);
  }

 private:
  struct Side {
    ByteStream& stream;
    const char* name;
    bool close_seen = false;   // it sent a Close
    bool close_sent = false;   // it was sent a Close (relayed or the proxy's)
    bool write_ended = false;  // its stream was ended (close_write)
    bool broken = false;       // a read or write failed, or was cut mid-write
    bool writing = false;
    uint16_t close_code = 0;  // what the proxy sends it when it ends the WebSocket
  };

  // The per-message state of one direction.
  struct Message {
    ws::Opcode opcode = ws::Opcode::kBinary;
    bool first_frame = true;
  };

  bool from_guest(const Side& side) const { return &side == &guest_; }

  void stop(std::string why, uint16_t guest_code, uint16_t upstream_code) {
    if (stopping_) return;
    stopping_ = true;
    outcome_.end = std::move(why);
    guest_.close_code = guest_code;
    upstream_.close_code = upstream_code;
    signal_->cancel();
  }

  void ending() {
    if (!ending_since_) ending_since_ = Clock::now();
    signal_->cancel();
  }

  // A client's frame carries a fresh, unpredictable masking key (RFC 6455
  // 5.3): the proxy's own, never the guest's.
  bool next_mask(uint8_t mask[4]) {
    if (mask_at_ + 4 > sizeof(mask_pool_)) {
      if (RAND_bytes(mask_pool_, sizeof(mask_pool_)) != 1) return false;
      mask_at_ = 0;
    }
    std::copy(mask_pool_ + mask_at_, mask_pool_ + mask_at_ + 4, mask);
    mask_at_ += 4;
    return true;
  }

  // Appends `payload` as a frame for `to`; false when no mask could be made.
  bool emit(const Side& to, bool fin, ws::Opcode opcode, std::string_view payload, std::string& out) {
    if (!from_guest(to)) {
      uint8_t mask[4];
      if (!next_mask(mask)) return false;
      out += ws::frame(fin, opcode, payload, mask);
    } else {
      out += ws::frame(fin, opcode, payload, nullptr);
    }
    return true;
  }

  // One piece from `src` into frames for `dst` (appended to `out`); false
  // when the WebSocket must end (stop() was called).
  bool relay_piece(Side& src, Side& dst, ws::Piece& piece, Message& msg, std::string& out) {
    const bool up = from_guest(src);
    if (piece.kind == ws::Piece::Kind::kControl) {
      if (up && screen_.armed()) {
        std::vector<std::string> hits = screen_.check(piece.payload, exempt_);
        if (!hits.empty()) return tripwire(std::move(hits));
      }
      if (!up && scrubber_.armed()) outcome_.reflections.merge(scrubber_.scrub(piece.payload));
      if (!emit(dst, true, piece.opcode, piece.payload, out)) return fail_mask();
      if (piece.opcode == ws::Opcode::kClose) {
        src.close_seen = true;
        dst.close_sent = true;
        ending();
      }
      return true;
    }
    if (piece.message_start) {
      msg.opcode = piece.opcode;
      msg.first_frame = true;
    }
    // Each direction's messages are one stream to its data chain: the
    // filters' state carries over a message's end, so a tripwire or secret
    // split across messages is still found. A message is delivered at its
    // end (held bytes go: filters::Mark::kMessageEnd).
    std::string clean;
    filters::DataChain& chain = up ? chains_.up : chains_.down;
    if (chain.empty()) {
      clean.swap(piece.payload);
    } else {
      const filters::Mark mark = piece.message_end ? filters::Mark::kMessageEnd : filters::Mark::kMore;
      filters::DataResult r = chain.run(piece.payload, mark, clean);
      if (r.stopped()) return tripwire(std::move(r.tripwires));
    }
    // The proxy frames what it releases: a screen or scrubber holding back a
    // partial match makes the frames differ from the sender's (RFC 6455 5.4
    // lets an intermediary refragment a message without extensions).
    if (!clean.empty() || piece.message_end) {
      if (!emit(dst, piece.message_end, msg.first_frame ? msg.opcode : ws::Opcode::kContinuation, clean, out))
        return fail_mask();
      msg.first_frame = false;
    }
    (up ? outcome_.bytes_up : outcome_.bytes_down) += clean.size();
    if (piece.message_end) (up ? outcome_.messages_up : outcome_.messages_down)++;
    return true;
  }

  bool tripwire(std::vector<std::string> labels) {
    outcome_.tripwires = std::move(labels);
    stop("tripwire", ws::kClosePolicyViolation, ws::kCloseGoingAway);
    return false;
  }

  bool fail_mask() {
    stop("no masking key (random source failed)", ws::kCloseGoingAway, ws::kCloseGoingAway);
    return false;
  }

  // Reads `src`'s frames and writes their payload, framed anew, to `dst`,
  // until `src` ends its stream or the WebSocket stops.
  awaitable<void> pump(Side& src, Side& dst, std::string in) {
    ws::FrameReader reader(from_guest(src) ? ws::Sender::kClient : ws::Sender::kServer, limits_.max_message);
    Message msg;
    std::vector<ws::Piece> pieces;
    std::string out;
    char buf[kReadChunk];
    bool fresh = !in.empty();  // bytes that came with the handshake
    const auto loop = co_await asio::this_coro::executor;
    LoopShare& share = LoopShare::of_current_loop(loop);
    try {
      for (;;) {
        if (!fresh) {
          const size_t n = co_await src.stream.read_some(buf, sizeof(buf));
          co_await share.take(session_, n);  // the session's turn at the loop
          if (n == 0) {
            // Its end of stream is passed on (after all it sent before).
            dst.writing = true;
            co_await with_deadline(dst.stream.close_write(), kCloseWrite);
            dst.writing = false;
            dst.write_ended = true;
            ending();
            co_return;
          }
          in.append(buf, n);
          last_activity_ = Clock::now();
        }
        fresh = false;
        pieces.clear();
        out.clear();
        const ws::FrameReader::Step step = reader.feed(in, pieces);
        in.erase(0, step.consumed);
        bool go_on = true;
        for (ws::Piece& piece : pieces) {
          go_on = relay_piece(src, dst, piece, msg, out);
          if (!go_on) break;
        }
        if (!out.empty()) {
          dst.writing = true;
          co_await with_deadline(dst.stream.write_all(out), limits_.idle_timeout);
          dst.writing = false;
        }
        if (!go_on) co_return;
        if (step.error != nullptr) {
          const bool guest = from_guest(src);
          stop(std::string(src.name) + ": " + step.error, guest ? step.error_code : ws::kCloseGoingAway,
               guest ? ws::kCloseGoingAway : step.error_code);
          co_return;
        }
      }
    } catch (const std::exception& e) {
      // Cut off by stop() (the watch ended the relay), or the stream failed.
      if (!stopping_) {
        src.broken = true;
        dst.broken = dst.broken || dst.writing;
        stop(std::string(src.name) + ": " + e.what(), ws::kCloseGoingAway, ws::kCloseGoingAway);
      }
      if (dst.writing) dst.broken = true;
    }
  }

  // Ends the relay when it idles past the limit, when a closing side's peer
  // takes too long, or at once on stop().
  awaitable<void> watch() {
    for (;;) {
      if (stopping_) co_return;
      Clock::time_point deadline = last_activity_ + limits_.idle_timeout;
      if (ending_since_) deadline = std::min(deadline, *ending_since_ + kClosingGrace);
      if (Clock::now() >= deadline) {
        stop(ending_since_ && Clock::now() >= *ending_since_ + kClosingGrace ? "closing timed out" : "idle",
             ws::kCloseGoingAway, ws::kCloseGoingAway);
        co_return;
      }
      signal_->expires_at(deadline);
      co_await signal_->async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    }
  }

  awaitable<void> send_close(Side& side) {
    if (side.close_code == 0 || side.close_sent || side.write_ended || side.broken) co_return;
    side.close_sent = true;
    std::string out;
    if (!emit(side, true, ws::Opcode::kClose, ws::close_payload(side.close_code, "zeroness"), out)) co_return;
    try {
      co_await with_deadline(side.stream.write_all(out), kCloseWrite);
      co_await with_deadline(side.stream.close_write(), kCloseWrite);
      // What it still sends (the rest of a message cut off, its Close) is
      // read and dropped for a moment: closing with unread bytes would reset
      // the connection, and the peer could lose the Close saying why.
      char buf[kReadChunk];
      auto read_for = [&side, &buf](std::chrono::steady_clock::duration left) {
        return with_deadline(side.stream.read_some(buf, sizeof(buf)), left);
      };
      co_await drain_lingering(read_for, kDrain);
    } catch (const std::exception&) {
    }
  }

  Side guest_, upstream_;
  const SecretScrubber& scrubber_;
  const RequestScreen& screen_;
  const std::vector<Substitution>& exempt_;
  const WebSocketLimits& limits_;
  WebSocketChains chains_;  // each direction's messages, one after another
  const std::string& session_;
  std::optional<asio::steady_timer> signal_;
  Clock::time_point last_activity_;
  std::optional<Clock::time_point> ending_since_;
  bool stopping_ = false;
  WebSocketOutcome outcome_;
  uint8_t mask_pool_[256] = {};
  size_t mask_at_ = sizeof(mask_pool_);
};

}  // namespace

awaitable<WebSocketOutcome> relay_websocket(ByteStream& guest, std::string guest_pending,
                                            ByteStream& upstream, std::string upstream_pending,
                                            const SecretScrubber& scrubber, const RequestScreen& screen,
                                            const std::vector<Substitution>& exempt, WebSocketChains chains,
                                            const WebSocketLimits& limits, const std::string& session) {
  Relay relay(guest, upstream, scrubber, screen, exempt, std::move(chains), limits, session);
  WebSocketOutcome outcome = co_await relay.run(std::move(guest_pending), std::move(upstream_pending));
  co_return outcome;
}

}  // namespace zn::proxy
