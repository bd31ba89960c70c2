// What both ends of an HTTP/2 connection share: an nghttp2 session fed
// bytes and drained of bytes (no sockets), the bounds of h2_limits.h
// counted in its callbacks, and response/request bodies buffered per stream
// and released as the peer's flow-control window allows.
//
// H2ServerSession (the guest side) and H2ClientSession (the upstream side)
// build on it; each turns complete header blocks and DATA frames into its
// own events. One thread per session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "userspace/h2/body_buffer.h"
#include "userspace/h2/flood_guard.h"
#include "userspace/h2/frame_scanner.h"
#include "userspace/h2/h2_events.h"
#include "userspace/h2/fields.h"
#include "userspace/h2/h2_limits.h"
#include "userspace/h2/peer_streams.h"

struct nghttp2_session;
struct nghttp2_session_callbacks;
struct nghttp2_option;

namespace zn::h2 {

struct SessionOptions {
  H2Limits limits;
  // Empty: std::chrono::steady_clock::now.
  Clock clock;
  // Off: the session grants the peer more window as soon as feed() has
  // taken its DATA. On: only consume() does, so a caller that cannot pass a
  // body on yet holds the sender back without stalling other streams.
  bool manual_window_updates = false;
};

class SessionCore {
 public:
  SessionCore(const SessionCore&) = delete;
  SessionCore& operator=(const SessionCore&) = delete;
  virtual ~SessionCore();

  // Bytes from the peer. Events are queued; not ok: the connection is over
  // (write take_output(), then close). What the session has to send is
  // serialised here already, so a caller that cannot write should stop
  // feeding rather than let output pile up.
  Result feed(std::span<const uint8_t> bytes);
  // Bytes to write to the peer (may be empty). May queue events too: a
  // stream closes once its last frame is serialised.
  std::string take_output();
  // Nothing more to read or to write: close the connection.
  bool finished() const;

  // Body bytes on a stream whose headers were submitted with has_body.
  // Buffered; written as the peer's window opens. False: the stream is gone
  // or its body already ended.
  bool send_data(int32_t stream_id, std::string_view bytes, bool end_stream);
  // Ends the body with trailer fields instead of END_STREAM on DATA.
  bool send_trailers(int32_t stream_id, const std::vector<Field>& trailers);
  // Body bytes buffered on the stream, not yet written (for backpressure).
  size_t buffered(int32_t stream_id) const;
  // The same over every stream of the connection (issue 32: the bound on
  // what one connection holds for a peer whose windows are shut).
  size_t buffered_total() const { return buffered_total_; }
  // RST_STREAM with `error_code` (RFC 9113 7). False: no such stream.
  bool reset_stream(int32_t stream_id, uint32_t error_code);
  // GOAWAY with `error_code`; NO_ERROR lets open streams finish.
  void goaway(uint32_t error_code);
  // With manual_window_updates: `bytes` of the stream's DATA were passed
  // on. Every byte of every data event must be consumed once, also on a
  // stream since reset: the connection's window is shared.
  void consume(int32_t stream_id, size_t bytes);

  const H2Counters& counters() const { return counters_; }

 protected:
  struct Stream {
    std::vector<Field> block;  // the header block being received
    size_t block_bytes = 0;    // RFC 9113 6.5.2 size of `block` so far
    bool block_too_large = false;
    bool announced = false;  // the caller has seen it (and answers it)
    bool rejected = false;   // the session answered or reset it itself
    bool peer_reset = false;
    bool local_ended = false;  // END_STREAM written
    bool peer_initiated = false;
    bool answered = false;   // our header block is submitted
    bool body_open = false;  // a data source is attached and not ended
    std::string in_frame;    // the DATA frame being received
    BodyBuffer out;          // body bytes not yet written
    bool out_end = false;
    std::optional<std::vector<Field>> trailers;
  };

  SessionCore(bool server, SessionOptions options);

  // A complete header block was received on `stream` (already validated by
  // nghttp2; `block_too_large` may be set). `category` is nghttp2's.
  virtual void on_header_block(int32_t stream_id, Stream& stream, int category, bool end_stream) = 0;
  // A complete DATA frame on an announced, not rejected stream.
  virtual void on_data_frame(int32_t stream_id, Stream& stream, std::string bytes, bool end_stream) = 0;
  // The stream closed (after the last frame about it); it is erased next.
  virtual void on_stream_closed(int32_t stream_id, Stream& stream, uint32_t error_code) = 0;
  virtual void push(LimitTripped event) = 0;
  virtual void push(StreamReset event) = 0;
  virtual void push(GoAway event) = 0;

  // A connection-wide bound: counted, reported, GOAWAY(ENHANCE_YOUR_CALM)
  // queued and feed() fails from now on.
  void trip_connection(Limit limit, std::string detail);
  // A one-stream bound: counted and reported; the caller of this answers or
  // resets the stream.
  void trip_stream(Limit limit, int32_t stream_id, std::string detail);
  // A connection error nghttp2 does not detect itself (RFC 9113 5.4.1):
  // GOAWAY with `error_code` queued and feed() fails from now on.
  void protocol_error(uint32_t error_code, std::string detail);

  // nghttp2_submit_* with `fields` as the header block, and a data source
  // reading `stream`'s buffered body when has_body. Returns nghttp2's value.
  int submit_response_block(int32_t stream_id, const std::vector<Field>& fields, bool has_body);
  int32_t submit_request_block(const std::vector<Field>& fields, bool has_body);

  Stream* find(int32_t stream_id);
  Stream& stream_entry(int32_t stream_id) { return streams_[stream_id]; }
  nghttp2_session* session() { return session_; }
  const H2Limits& limits() const { return options_.limits; }

 private:
  struct Callbacks;  // the nghttp2 callbacks, friends of this class
  void fail(std::string error);
  // Serialises what nghttp2 has queued into output_.
  void drain();
  // Counts an empty DATA frame; false (and tripped) when over the rate.
  bool note_empty_data();
  // Every check of a frame header from the peer, before nghttp2 reads the
  // frame: false (and the connection failed) to stop.
  bool check_frame(const FrameHead& head);
  // nghttp2_session_mem_recv failed with `rv`: counted when it is a bound.
  void recv_error(ssize_t rv);
  // RFC 9113 6.3 and 5.3.1 on a PRIORITY frame, which nghttp2 skips: false
  // (and the connection failed) when it breaks them.
  bool check_priority_frame(const FrameHead& head);
  bool check_priority_fields(const PriorityFields& fields);
  // RFC 9113 5.1 and 5.1.1 on a frame from the client (server side): false
  // (and the connection failed) for a HEADERS or DATA on a stream the
  // client closed, or on a lower id than the last it opened.
  bool check_stream_state(const FrameHead& head);
  // Counts a header block nghttp2 decodes for nothing against
  // decoded_header_bytes: false (and tripped) when over.
  bool charge_ignored_block(const FrameHead& head);

  SessionOptions options_;
  bool server_;
  nghttp2_session* session_ = nullptr;
  FloodGuard guard_;
  FrameScanner scanner_;
  PeerStreams peer_streams_;
  bool ignored_block_ = false;  // the header block coming is on a stream nghttp2 ignores
  H2Counters counters_;
  std::unordered_map<int32_t, Stream> streams_;
  size_t buffered_total_ = 0;  // every stream's out
  size_t open_peer_streams_ = 0;
  bool failed_ = false;
  bool goaway_received_ = false;
  uint32_t goaway_sent_code_ = 0;
  std::string output_;  // serialised, not yet taken
  std::string error_;
  std::string last_invalid_;  // nghttp2's reason for the last invalid frame, for error_
};

}  // namespace zn::h2
