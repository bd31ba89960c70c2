#include "userspace/h2/session_core.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <utility>

#include "userspace/h2/session_callbacks.h"

namespace zn::h2 {

namespace {

constexpr size_t kClientPrefaceBytes = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr uint8_t kDataFrame = 0x0, kHeadersFrame = 0x1, kRstStreamFrame = 0x3, kSettingsFrame = 0x4;
constexpr uint8_t kContinuationFrame = 0x9;
constexpr uint8_t kEndStreamFlag = 0x1, kEndHeadersFlag = 0x4;
constexpr uint64_t kHpackFieldOverhead = 32;  // RFC 9113 6.5.2
constexpr size_t kSettingsEntryBytes = 6;
constexpr size_t kFrameHeadBytes = 9;

}  // namespace

SessionCore::SessionCore(bool server, SessionOptions options)
    : options_(std::move(options)),
      server_(server),
      guard_(options_.limits, options_.clock),
      scanner_(server ? kClientPrefaceBytes : 0) {
  const H2Limits& l = options_.limits;
  nghttp2_session_callbacks* cb = nullptr;
  if (nghttp2_session_callbacks_new(&cb) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, Callbacks::on_begin_frame);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, Callbacks::on_invalid_frame_recv);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cb, Callbacks::on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, Callbacks::on_data_chunk_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, Callbacks::on_frame_send);

  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cb);
    throw std::bad_alloc();
  }
  // HTTP messaging stays on: nghttp2 checks RFC 9113 8 (fields.h says what).
  nghttp2_option_set_max_continuations(opt, l.max_continuations);
  nghttp2_option_set_max_settings(opt, l.max_settings_entries);
  nghttp2_option_set_max_outbound_ack(opt, l.max_queued_acks);
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, l.hpack_table_bytes);
  nghttp2_option_set_peer_max_concurrent_streams(opt, l.max_concurrent_streams);
  nghttp2_option_set_no_closed_streams(opt, 1);
  if (options_.manual_window_updates) nghttp2_option_set_no_auto_window_update(opt, 1);
  // nghttp2's own rapid-reset bucket, looser than peer_resets: a backstop.
  const uint64_t window_s =
      std::max<uint64_t>(1, std::chrono::ceil<std::chrono::seconds>(l.peer_resets.window).count());
  nghttp2_option_set_stream_reset_rate_limit(opt, 2 * uint64_t{l.peer_resets.events} + 1,
                                             std::max<uint64_t>(1, 2 * l.peer_resets.events / window_s));

  const int rv = server ? nghttp2_session_server_new2(&session_, cb, this, opt)
                        : nghttp2_session_client_new2(&session_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) throw std::runtime_error(std::string("nghttp2 session: ") + nghttp2_strerror(rv));
}

SessionCore::~SessionCore() { nghttp2_session_del(session_); }

Result SessionCore::feed(std::span<const uint8_t> bytes) {
  if (failed_) return Result{false, error_};
  // nghttp2 is given the bytes one frame at a time, each frame header
  // checked first: for the bounds nghttp2 enforces silently, and for the
  // rules it leaves out, which need its state as of the frame before.
  size_t fed = 0;
  bool recv_failed = false;
  const auto recv_to = [&](size_t end) {
    if (end <= fed || recv_failed) return;
    const ssize_t rv = nghttp2_session_mem_recv(session_, bytes.data() + fed, end - fed);
    fed = end;
    if (rv < 0) {
      recv_failed = true;
      if (!failed_) recv_error(rv);
    }
  };
  scanner_.scan(
      bytes,
      [&](const FrameHead& head, size_t head_end) {
        recv_to(head_end >= kFrameHeadBytes ? head_end - kFrameHeadBytes : 0);
        // Once nghttp2 has failed the connection, what follows is not read.
        if (recv_failed || failed_ || !nghttp2_session_want_read(session_)) return false;
        return check_frame(head);
      },
      [&](const PriorityFields& fields) { return check_priority_fields(fields); });
  if (!failed_) recv_to(bytes.size());
  // What nghttp2 queued is serialised now: a GOAWAY it decided on (a
  // protocol error) only shows, as want_read turning false, once written.
  drain();
  if (failed_) return Result{false, error_};
  if (!nghttp2_session_want_read(session_)) {
    // nghttp2 queued a GOAWAY for a protocol error, or GOAWAYs left no
    // stream to wait for.
    fail(goaway_sent_code_ == NGHTTP2_NO_ERROR
             ? std::string("connection closing after GOAWAY")
             : "HTTP/2 protocol error (GOAWAY " + std::string(nghttp2_http2_strerror(goaway_sent_code_)) +
                   ")" + (last_invalid_.empty() ? std::string() : ": " + last_invalid_));
    return Result{false, error_};
  }
  return Result{};
}

std::string SessionCore::take_output() {
  drain();
  return std::exchange(output_, {});
}

void SessionCore::drain() {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) {
      fail(std::string("HTTP/2 send: ") + nghttp2_strerror(static_cast<int>(n)));
      return;
    }
    if (n == 0) return;
    output_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
}

bool SessionCore::finished() const {
  return !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

bool SessionCore::send_data(int32_t stream_id, std::string_view bytes, bool end_stream) {
  Stream* st = find(stream_id);
  if (st == nullptr || !st->body_open) return false;
  st->out.append(bytes);
  buffered_total_ += bytes.size();
  if (end_stream) {
    st->out_end = true;
    st->body_open = false;
  }
  nghttp2_session_resume_data(session_, stream_id);  // fails harmlessly when not deferred
  return true;
}

bool SessionCore::send_trailers(int32_t stream_id, const std::vector<Field>& trailers) {
  Stream* st = find(stream_id);
  if (st == nullptr || !st->body_open) return false;
  std::vector<Field> fields;
  if (to_h2_fields(trailers, fields) != nullptr) return false;
  st->trailers = std::move(fields);
  st->out_end = true;
  st->body_open = false;
  nghttp2_session_resume_data(session_, stream_id);
  return true;
}

size_t SessionCore::buffered(int32_t stream_id) const {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? 0 : it->second.out.size();
}

bool SessionCore::reset_stream(int32_t stream_id, uint32_t error_code) {
  if (find(stream_id) == nullptr) return false;
  return nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, error_code) == 0;
}

void SessionCore::goaway(uint32_t error_code) {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        error_code, nullptr, 0);
}

void SessionCore::consume(int32_t stream_id, size_t bytes) {
  if (!options_.manual_window_updates) return;
  // The connection's window is given back even when the stream is gone.
  nghttp2_session_consume(session_, stream_id, bytes);
}

void SessionCore::trip_connection(Limit limit, std::string detail) {
  ++counters_.at(limit);
  fail(std::string("HTTP/2 limit ") + std::string(limit_name(limit)) + ": " + detail);
  push(LimitTripped{limit, std::move(detail), 0});
  nghttp2_session_terminate_session(
      session_, limit == Limit::frame_size ? NGHTTP2_FRAME_SIZE_ERROR : NGHTTP2_ENHANCE_YOUR_CALM);
}

bool SessionCore::check_frame(const FrameHead& head) {
  const H2Limits& l = options_.limits;
  if (head.length > l.max_frame_bytes) {
    trip_connection(Limit::frame_size, "a frame of " + std::to_string(head.length) + " bytes, over " +
                                           std::to_string(l.max_frame_bytes));
    return false;
  }
  if (head.type == kSettingsFrame && head.length / kSettingsEntryBytes > l.max_settings_entries) {
    trip_connection(Limit::settings_entries, "a SETTINGS frame of " +
                                                 std::to_string(head.length / kSettingsEntryBytes) +
                                                 " entries, over " + std::to_string(l.max_settings_entries));
    return false;
  }
  if (head.type == kRstStreamFrame) peer_streams_.peer_reset(head.stream_id);
  return check_priority_frame(head) && check_stream_state(head) && charge_ignored_block(head);
}

void SessionCore::recv_error(ssize_t rv) {
  const H2Limits& l = options_.limits;
  switch (rv) {
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      trip_connection(Limit::continuation_frames, "more than " + std::to_string(l.max_continuations) +
                                                      " CONTINUATIONs in a header block");
      break;
    case NGHTTP2_ERR_FLOODED:
      trip_connection(Limit::queued_acks, "more than " + std::to_string(l.max_queued_acks) + " ACKs unsent");
      break;
    default:
      fail(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
      break;
  }
}

void SessionCore::protocol_error(uint32_t error_code, std::string detail) {
  fail("HTTP/2 protocol error (GOAWAY " + std::string(nghttp2_http2_strerror(error_code)) + "): " + detail);
  last_invalid_ = std::move(detail);
  nghttp2_session_terminate_session(session_, error_code);
}

// With SETTINGS_NO_RFC7540_PRIORITIES nghttp2 passes over PRIORITY frames
// unread; the priority tree stays gone, but the frame's own rules are the
// RFC's. A stream error they call for is a connection error here (5.4.1
// allows it): no client sends these, and a reply per frame would be one
// more thing a peer could make us send in bulk.
bool SessionCore::check_priority_frame(const FrameHead& head) {
  if (head.type != kPriorityFrame) return true;
  if (head.stream_id == 0) {
    protocol_error(NGHTTP2_PROTOCOL_ERROR, "PRIORITY on stream 0");
    return false;
  }
  if (head.length != kPriorityPayloadBytes) {
    protocol_error(NGHTTP2_FRAME_SIZE_ERROR, "PRIORITY of " + std::to_string(head.length) +
                                                 " bytes on stream " + std::to_string(head.stream_id));
    return false;
  }
  return true;
}

bool SessionCore::check_priority_fields(const PriorityFields& fields) {
  if (fields.depends_on != fields.stream_id) return true;
  protocol_error(NGHTTP2_PROTOCOL_ERROR,
                 "PRIORITY: stream " + std::to_string(fields.stream_id) + " depends on itself");
  return false;
}

bool SessionCore::check_stream_state(const FrameHead& head) {
  if (!server_ || (head.type != kHeadersFrame && head.type != kDataFrame) || head.stream_id % 2 == 0)
    return true;  // even ids and id 0 are nghttp2's to refuse
  const uint32_t id = head.stream_id;
  const bool end_stream = head.flags & kEndStreamFlag;
  if (id > peer_streams_.last()) {
    // A new stream (a DATA on one is nghttp2's PROTOCOL_ERROR).
    if (head.type == kHeadersFrame) peer_streams_.opened(id);
  } else if (nghttp2_session_find_stream(session_, static_cast<int32_t>(id)) == nullptr) {
    const char* what = head.type == kHeadersFrame ? "HEADERS" : "DATA";
    switch (peer_streams_.closed(id)) {
      case PeerStreams::Answer::ignore:
        // nghttp2 ignores it, but still decodes a header block.
        if (head.type == kHeadersFrame) ignored_block_ = true;
        break;
      case PeerStreams::Answer::stream_closed:
        protocol_error(NGHTTP2_STREAM_CLOSED, std::string(what) + " on closed stream " + std::to_string(id));
        return false;
      case PeerStreams::Answer::never_opened:
        protocol_error(head.type == kHeadersFrame ? NGHTTP2_PROTOCOL_ERROR : NGHTTP2_STREAM_CLOSED,
                       std::string(what) + " on stream " + std::to_string(id) + ", below the last opened (" +
                           std::to_string(peer_streams_.last()) + ")");
        return false;
    }
  }
  if (end_stream) peer_streams_.peer_ended(id);
  return true;
}

// A header block nghttp2 decodes without a callback (on a stream we reset)
// is work on_header never sees: each of its bytes can emit one field, of
// at least 32 bytes in RFC 9113 6.5.2's count, so each is charged as one.
bool SessionCore::charge_ignored_block(const FrameHead& head) {
  if (head.type != kHeadersFrame && head.type != kContinuationFrame) return true;
  if (!ignored_block_) return true;
  if (head.flags & kEndHeadersFlag) ignored_block_ = false;
  if (guard_.note(Limit::decoded_header_bytes, uint64_t{head.length} * kHpackFieldOverhead)) return true;
  trip_connection(Limit::decoded_header_bytes,
                  over_rate(options_.limits.decoded_header_bytes, "header bytes decoded"));
  return false;
}

void SessionCore::trip_stream(Limit limit, int32_t stream_id, std::string detail) {
  ++counters_.at(limit);
  push(LimitTripped{limit, std::move(detail), stream_id});
}

bool SessionCore::note_empty_data() {
  if (guard_.note(Limit::empty_data_frames)) return true;
  const H2Limits& l = options_.limits;
  trip_connection(Limit::empty_data_frames, over_rate(l.empty_data_frames, "empty DATA frames"));
  return false;
}

int SessionCore::submit_response_block(int32_t stream_id, const std::vector<Field>& fields, bool has_body) {
  Stream* st = find(stream_id);
  if (st == nullptr) return NGHTTP2_ERR_INVALID_ARGUMENT;
  std::vector<nghttp2_nv> nva = to_nv(fields);
  nghttp2_data_provider body{};
  body.read_callback = Callbacks::read_body;
  const int rv =
      nghttp2_submit_response(session_, stream_id, nva.data(), nva.size(), has_body ? &body : nullptr);
  if (rv == 0) {
    st->answered = true;
    st->body_open = has_body;
  }
  return rv;
}

int32_t SessionCore::submit_request_block(const std::vector<Field>& fields, bool has_body) {
  std::vector<nghttp2_nv> nva = to_nv(fields);
  nghttp2_data_provider body{};
  body.read_callback = Callbacks::read_body;
  const int32_t id =
      nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), has_body ? &body : nullptr, nullptr);
  if (id > 0) {
    Stream& st = streams_[id];
    st.answered = true;
    st.body_open = has_body;
  }
  return id;
}

SessionCore::Stream* SessionCore::find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

void SessionCore::fail(std::string error) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(error);
}

}  // namespace zn::h2
