#include "userspace/h2/session_callbacks.h"

#include <algorithm>
#include <utility>

namespace zn::h2 {

namespace {

SessionCore& self(void* user_data) { return *static_cast<SessionCore*>(user_data); }

}  // namespace

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

std::string over_rate(const RateBound& bound, const char* what) {
  return "more than " + std::to_string(bound.events) + " " + what + " in " +
         std::to_string(bound.window.count()) + " ms";
}

// Rate bounds are counted as each frame header arrives, before nghttp2
// does any work for the frame.
int SessionCore::Callbacks::on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user_data) {
  SessionCore& s = self(user_data);
  const H2Limits& l = s.options_.limits;
  bool ok = true;
  if (hd->type == NGHTTP2_SETTINGS && !(hd->flags & NGHTTP2_FLAG_ACK) &&
      !s.guard_.note(Limit::settings_frames)) {
    s.trip_connection(Limit::settings_frames, over_rate(l.settings_frames, "SETTINGS"));
    ok = false;
  } else if (hd->type == NGHTTP2_PING && !s.guard_.note(Limit::ping_frames)) {
    s.trip_connection(Limit::ping_frames, over_rate(l.ping_frames, "PINGs"));
    ok = false;
  } else if (hd->type == NGHTTP2_RST_STREAM && s.server_ && !s.guard_.note(Limit::peer_resets)) {
    s.trip_connection(Limit::peer_resets, over_rate(l.peer_resets, "RST_STREAMs"));
    ok = false;
  } else if (hd->type == NGHTTP2_DATA && hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM)) {
    ok = s.note_empty_data();
  }
  return ok ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

int SessionCore::Callbacks::on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
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
      if (st->block_too_large && !s.guard_.note(Limit::header_list_refusals)) {
        // Each refusal cost a whole block's decoding: a peer that keeps
        // sending them is not a client that was told once.
        s.trip_connection(Limit::header_list_refusals,
                          over_rate(s.options_.limits.header_list_refusals, "header lists over the size"));
        return NGHTTP2_ERR_CALLBACK_FAILURE;
      }
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
                          over_rate(l.small_window_updates, "WINDOW_UPDATEs granting under the minimum"));
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
int SessionCore::Callbacks::on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame* frame,
                                                  int lib_error_code, void* user_data) {
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

int SessionCore::Callbacks::on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
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

int SessionCore::Callbacks::on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                                      void* user_data) {
  SessionCore& s = self(user_data);
  // RFC 9113 6.5.2's size of the field, counted against the connection's
  // decoding budget whatever becomes of it: past the budget nothing more
  // of this input is decoded.
  const size_t field_bytes = namelen + valuelen + 32;
  if (!s.guard_.note(Limit::decoded_header_bytes, field_bytes)) {
    s.trip_connection(Limit::decoded_header_bytes,
                      over_rate(s.options_.limits.decoded_header_bytes, "header bytes decoded"));
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Stream* st = s.find(frame->hd.stream_id);
  if (st == nullptr) return 0;
  // Over the header list size, the rest of the block is still decoded
  // (HPACK state is connection-wide) but no longer kept.
  st->block_bytes += field_bytes;
  if (st->block_bytes > s.options_.limits.max_header_list_bytes) {
    st->block_too_large = true;
    std::vector<Field>().swap(st->block);
    return 0;
  }
  st->block.push_back(Field{std::string(reinterpret_cast<const char*>(name), namelen),
                            std::string(reinterpret_cast<const char*>(value), valuelen)});
  return 0;
}

int SessionCore::Callbacks::on_data_chunk_recv(nghttp2_session* session, uint8_t, int32_t stream_id,
                                               const uint8_t* data, size_t len, void* user_data) {
  SessionCore& s = self(user_data);
  Stream* st = s.find(stream_id);
  if (st != nullptr && st->announced && !st->rejected) {
    st->in_frame.append(reinterpret_cast<const char*>(data), len);
  } else if (s.options_.manual_window_updates) {
    // Nobody will consume() it: give the window back now.
    nghttp2_session_consume(session, stream_id, len);  // the connection's window too
  }
  return 0;
}

int SessionCore::Callbacks::on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                                            void* user_data) {
  SessionCore& s = self(user_data);
  Stream* st = s.find(stream_id);
  if (st == nullptr) return 0;
  if (st->peer_initiated && s.open_peer_streams_ > 0) --s.open_peer_streams_;
  s.on_stream_closed(stream_id, *st, error_code);
  s.buffered_total_ -= st->out.size();  // never to be written
  s.streams_.erase(stream_id);
  return 0;
}

int SessionCore::Callbacks::on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  SessionCore& s = self(user_data);
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    if (Stream* st = s.find(frame->hd.stream_id)) st->local_ended = true;
  }
  if (frame->hd.type == NGHTTP2_GOAWAY) s.goaway_sent_code_ = frame->goaway.error_code;
  if (frame->hd.type == NGHTTP2_RST_STREAM)
    s.peer_streams_.local_reset(static_cast<uint32_t>(frame->hd.stream_id));
  return 0;
}

// The body's data source: what is buffered, then EOF (with trailers, or
// END_STREAM), or DEFERRED until send_data() resumes it.
ssize_t SessionCore::Callbacks::read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf,
                                          size_t length, uint32_t* data_flags, nghttp2_data_source*,
                                          void* user_data) {
  SessionCore& s = self(user_data);
  Stream* st = s.find(stream_id);
  if (st == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const size_t n = st->out.take(buf, length);
  s.buffered_total_ -= n;
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

}  // namespace zn::h2
