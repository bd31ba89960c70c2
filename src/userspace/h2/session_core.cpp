#include "userspace/h2/session_core.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace zn::h2 {

namespace {

constexpr size_t kClientPrefaceBytes = 24;  // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
constexpr uint8_t kSettingsFrame = 0x4;
constexpr size_t kSettingsEntryBytes = 6;

std::vector<nghttp2_nv> to_nv(const std::vector<Field>& fields) {
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size());
  for (const Field& f : fields) {
    // nghttp2 copies name and value at submission (no NO_COPY flags).
    nva.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(f.name.data())),
                             reinterpret_cast<uint8_t*>(const_cast<char*>(f.value.data())), f.name.size(),
                             f.value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  return nva;
}

std::string over(uint32_t events, std::chrono::milliseconds window, const char* what) {
  return "more than " + std::to_string(events) + " " + what + " in " + std::to_string(window.count()) + " ms";
}

}  // namespace

// nghttp2's C callbacks, forwarding to the session (user_data).
struct SessionCore::Callbacks {
  static SessionCore& self(void* user_data) { return *static_cast<SessionCore*>(user_data); }

  // Rate bounds are counted as each frame header arrives, before nghttp2
  // does any work for the frame.
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user_data) {
    SessionCore& s = self(user_data);
    const H2Limits& l = s.options_.limits;
    bool ok = true;
    if (hd->type == NGHTTP2_SETTINGS && !(hd->flags & NGHTTP2_FLAG_ACK) &&
        !s.guard_.note(Limit::settings_frames)) {
      s.trip_connection(Limit::settings_frames,
                        over(l.settings_frames.events, l.settings_frames.window, "SETTINGS"));
      ok = false;
    } else if (hd->type == NGHTTP2_PING && !s.guard_.note(Limit::ping_frames)) {
      s.trip_connection(Limit::ping_frames, over(l.ping_frames.events, l.ping_frames.window, "PINGs"));
      ok = false;
    } else if (hd->type == NGHTTP2_RST_STREAM && s.server_ && !s.guard_.note(Limit::peer_resets)) {
      s.trip_connection(Limit::peer_resets, over(l.peer_resets.events, l.peer_resets.window, "RST_STREAMs"));
      ok = false;
    } else if (hd->type == NGHTTP2_DATA && hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM)) {
      ok = s.note_empty_data();
    }
    return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    SessionCore& s = self(user_data);
    const int32_t id = frame->hd.stream_id;
    const bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    switch (frame->hd.type) {
      case NGHTTP2_DATA: {
        // Padding only: as empty as a zero-length frame.
        if (frame->hd.length > 0 && frame->hd.length == frame->data.padlen && !end_stream &&
            !s.note_empty_data())
          return NGHTTP2_ERR_CALLBACK_FAILURE;
        Stream* st = s.find(id);
        if (st == nullptr) break;
        std::string bytes = std::exchange(st->in_frame, {});
        if (st->announced && !st->rejected) s.on_data_frame(id, *st, std::move(bytes), end_stream);
        break;
      }
      case NGHTTP2_HEADERS: {
        Stream* st = s.find(id);
        if (st == nullptr) break;
        s.on_header_block(id, *st, frame->headers.cat, end_stream);
        if ((st = s.find(id)) != nullptr) {
          st->block.clear();
          st->block_bytes = 0;
          st->block_too_large = false;
        }
        break;
      }
      case NGHTTP2_WINDOW_UPDATE: {
        const H2Limits& l = s.options_.limits;
        if (static_cast<uint32_t>(frame->window_update.window_size_increment) < l.small_window_update_bytes &&
            !s.guard_.note(Limit::small_window_updates)) {
          s.trip_connection(Limit::small_window_updates,
                            over(l.small_window_updates.events, l.small_window_updates.window,
                                 "WINDOW_UPDATEs granting under the minimum"));
          return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
      }
      case NGHTTP2_RST_STREAM:
        if (Stream* st = s.find(id)) st->peer_reset = true;
        break;
      case NGHTTP2_GOAWAY:
        s.goaway_received_ = true;
        s.push(GoAway{frame->goaway.last_stream_id, frame->goaway.error_code});
        break;
      default:
        break;
    }
    return 0;
  }

  // nghttp2 found a frame invalid and reset the stream or queued a GOAWAY
  // itself; some of those are bounds the proxy counts.
  static int on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame* frame, int lib_error_code,
                                   void* user_data) {
    SessionCore& s = self(user_data);
    s.last_invalid_ = nghttp2_strerror(lib_error_code);
    const int32_t id = frame->hd.stream_id;
    if (frame->hd.type == NGHTTP2_WINDOW_UPDATE) {
      s.trip_stream(Limit::invalid_window_updates, id,
                    lib_error_code == NGHTTP2_ERR_FLOW_CONTROL ? "window over 2^31-1" : "zero increment");
    } else if (frame->hd.type == NGHTTP2_HEADERS && lib_error_code == NGHTTP2_ERR_REFUSED_STREAM) {
      s.trip_stream(Limit::concurrent_streams, id,
                    "over the advertised concurrent streams (not yet acknowledged)");
    } else if (frame->hd.type == NGHTTP2_HEADERS && s.server_ && s.find(id) == nullptr &&
               s.open_peer_streams_ >= s.options_.limits.max_concurrent_streams) {
      // Over a limit the peer acknowledged: nghttp2 closes the connection.
      s.trip_stream(Limit::concurrent_streams, 0, "over the acknowledged concurrent streams");
    }
    return 0;
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    SessionCore& s = self(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream& st = s.streams_[frame->hd.stream_id];
    if (s.server_ && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      st.peer_initiated = true;
      ++s.open_peer_streams_;
    }
    st.block.clear();
    st.block_bytes = 0;
    st.block_too_large = false;
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
    SessionCore& s = self(user_data);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* st = s.find(frame->hd.stream_id);
    if (st == nullptr) return 0;
    // RFC 9113 6.5.2. The block is still decoded to its end (HPACK state
    // is connection-wide) but no longer kept.
    st->block_bytes += namelen + valuelen + 32;
    if (st->block_bytes > s.options_.limits.max_header_list_bytes) {
      st->block_too_large = true;
      std::vector<Field>().swap(st->block);
      return 0;
    }
    st->block.push_back(Field{std::string(reinterpret_cast<const char*>(name), namelen),
                              std::string(reinterpret_cast<const char*>(value), valuelen)});
    return 0;
  }

  static int on_data_chunk_recv(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                                size_t len, void* user_data) {
    SessionCore& s = self(user_data);
    Stream* st = s.find(stream_id);
    if (st != nullptr && st->announced && !st->rejected) {
      st->in_frame.append(reinterpret_cast<const char*>(data), len);
    } else if (s.options_.manual_window_updates) {
      // Nobody will consume() it: give the window back now.
      if (nghttp2_session_consume(session, stream_id, len) != 0)
        nghttp2_session_consume_connection(session, len);
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user_data) {
    SessionCore& s = self(user_data);
    Stream* st = s.find(stream_id);
    if (st == nullptr) return 0;
    if (st->peer_initiated && s.open_peer_streams_ > 0) --s.open_peer_streams_;
    s.on_stream_closed(stream_id, *st, error_code);
    s.streams_.erase(stream_id);
    return 0;
  }

  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    SessionCore& s = self(user_data);
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      if (Stream* st = s.find(frame->hd.stream_id)) st->local_ended = true;
    }
    if (frame->hd.type == NGHTTP2_GOAWAY) s.goaway_sent_code_ = frame->goaway.error_code;
    return 0;
  }

  // The body's data source: what is buffered, then EOF (with trailers, or
  // END_STREAM), or DEFERRED until send_data() resumes it.
  static ssize_t read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source*, void* user_data) {
    SessionCore& s = self(user_data);
    Stream* st = s.find(stream_id);
    if (st == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const size_t n = std::min(length, st->out.size());
    std::memcpy(buf, st->out.data(), n);
    st->out.erase(0, n);
    if (st->out.empty() && st->out_end) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (st->trailers) {
        std::vector<nghttp2_nv> nva = to_nv(*st->trailers);
        if (nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size()) == 0)
          *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        st->trailers.reset();
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }
};

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
  // Bounds nghttp2 enforces silently, checked on the frame headers first.
  const H2Limits& l = options_.limits;
  scanner_.scan(bytes, [&](const FrameHead& head) {
    if (head.length > l.max_frame_bytes) {
      trip_connection(Limit::frame_size, "a frame of " + std::to_string(head.length) + " bytes, over " +
                                             std::to_string(l.max_frame_bytes));
      return false;
    }
    if (head.type == kSettingsFrame && head.length / kSettingsEntryBytes > l.max_settings_entries) {
      trip_connection(Limit::settings_entries,
                      "a SETTINGS frame of " + std::to_string(head.length / kSettingsEntryBytes) +
                          " entries, over " + std::to_string(l.max_settings_entries));
      return false;
    }
    return true;
  });
  if (failed_) return Result{false, error_};

  const ssize_t rv = nghttp2_session_mem_recv(session_, bytes.data(), bytes.size());
  if (rv < 0 && !failed_) {
    switch (rv) {
      case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
        trip_connection(Limit::continuation_frames, "more than " + std::to_string(l.max_continuations) +
                                                        " CONTINUATIONs in a header block");
        break;
      case NGHTTP2_ERR_FLOODED:
        trip_connection(Limit::queued_acks,
                        "more than " + std::to_string(l.max_queued_acks) + " ACKs unsent");
        break;
      default:
        fail(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
        nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
        break;
    }
  }
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
  if (nghttp2_session_consume(session_, stream_id, bytes) != 0)
    nghttp2_session_consume_connection(session_, bytes);
}

void SessionCore::trip_connection(Limit limit, std::string detail) {
  ++counters_.at(limit);
  fail(std::string("HTTP/2 limit ") + std::string(limit_name(limit)) + ": " + detail);
  push(LimitTripped{limit, std::move(detail), 0});
  nghttp2_session_terminate_session(
      session_, limit == Limit::frame_size ? NGHTTP2_FRAME_SIZE_ERROR : NGHTTP2_ENHANCE_YOUR_CALM);
}

void SessionCore::trip_stream(Limit limit, int32_t stream_id, std::string detail) {
  ++counters_.at(limit);
  push(LimitTripped{limit, std::move(detail), stream_id});
}

bool SessionCore::note_empty_data() {
  if (guard_.note(Limit::empty_data_frames)) return true;
  const H2Limits& l = options_.limits;
  trip_connection(Limit::empty_data_frames,
                  over(l.empty_data_frames.events, l.empty_data_frames.window, "empty DATA frames"));
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
