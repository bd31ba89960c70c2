#include "userspace/h2/server_session.h"

#include <nghttp2/nghttp2.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "userspace/h2/fields.h"

namespace zn::h2 {

H2ServerSession::H2ServerSession(ServerOptions options)
    : SessionCore(/*server=*/true, options), extended_connect_(options.enable_extended_connect) {
  const H2Limits& l = limits();
  std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, l.max_header_list_bytes},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, l.hpack_table_bytes},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, l.max_frame_bytes},
      // No RFC 7540 priority tree to maintain (and to be made to rework).
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (extended_connect_) settings.push_back({NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1});
  const int rv = nghttp2_submit_settings(session(), NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  if (rv != 0) throw std::runtime_error(std::string("nghttp2 SETTINGS: ") + nghttp2_strerror(rv));
}

bool H2ServerSession::submit_response(int32_t stream_id, int status, const std::vector<Field>& headers,
                                      bool has_body) {
  Stream* st = find(stream_id);
  if (st == nullptr || !st->announced || st->rejected || st->answered || status < 200 || status > 999)
    return false;
  std::vector<Field> fields;
  if (to_h2_fields(headers, fields) != nullptr) return false;
  fields.insert(fields.begin(), Field{":status", std::to_string(status)});
  return submit_response_block(stream_id, fields, has_body) == 0;
}

void H2ServerSession::on_header_block(int32_t stream_id, Stream& stream, int category, bool end_stream) {
  if (category == NGHTTP2_HCAT_REQUEST) {
    on_request(stream_id, stream, end_stream);
    return;
  }
  // Trailers (nghttp2 has checked they end the stream).
  if (!stream.announced || stream.rejected) return;
  if (stream.block_too_large) {
    trip_stream(Limit::header_list_size, stream_id, "request trailers over the header list size");
    reset_stream(stream_id, NGHTTP2_ENHANCE_YOUR_CALM);
    return;
  }
  RequestTrailers trailers{stream_id, {}};
  for (Field& f : stream.block)
    if (!f.name.empty() && f.name[0] != ':') trailers.headers.push_back(std::move(f));
  events_.emplace_back(std::move(trailers));
}

void H2ServerSession::on_request(int32_t stream_id, Stream& stream, bool end_stream) {
  if (stream.block_too_large) {
    trip_stream(Limit::header_list_size, stream_id,
                "request headers over " + std::to_string(limits().max_header_list_bytes) + " bytes");
    answer_locally(stream_id, stream, 431, end_stream);
    return;
  }
  RequestHeaders request;
  request.stream_id = stream_id;
  request.end_stream = end_stream;
  if (const char* why = read_request_block(std::move(stream.block), request)) {
    reject(stream_id, stream, std::string("malformed: ") + why);
    reset_stream(stream_id, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  if (request.method == "CONNECT" && (request.protocol.empty() || !extended_connect_)) {
    // A tunnel is not a request the proxy can decide: refused as a method.
    reject(stream_id, stream, "CONNECT refused");
    answer_locally(stream_id, stream, 405, end_stream);
    return;
  }
  stream.announced = true;
  events_.emplace_back(std::move(request));
}

void H2ServerSession::on_data_frame(int32_t stream_id, Stream&, std::string bytes, bool end_stream) {
  events_.emplace_back(RequestData{stream_id, std::move(bytes), end_stream});
}

void H2ServerSession::on_stream_closed(int32_t stream_id, Stream& stream, uint32_t error_code) {
  if (stream.announced) {
    if (error_code != NGHTTP2_NO_ERROR || !stream.local_ended)
      events_.emplace_back(StreamReset{stream_id, error_code});
  } else if (!stream.rejected && !stream.peer_reset && error_code != NGHTTP2_NO_ERROR) {
    // nghttp2 reset it before its header block was complete: malformed.
    events_.emplace_back(
        StreamRejected{stream_id, std::string("malformed: ") + nghttp2_http2_strerror(error_code)});
  }
}

void H2ServerSession::answer_locally(int32_t stream_id, Stream& stream, int status, bool request_ended) {
  stream.rejected = true;
  const std::vector<Field> fields = {{":status", std::to_string(status)}, {"content-length", "0"}};
  if (submit_response_block(stream_id, fields, /*has_body=*/false) != 0) {
    reset_stream(stream_id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  if (!request_ended) reset_stream(stream_id, NGHTTP2_NO_ERROR);
}

void H2ServerSession::reject(int32_t stream_id, Stream& stream, std::string reason) {
  stream.rejected = true;
  events_.emplace_back(StreamRejected{stream_id, std::move(reason)});
}

}  // namespace zn::h2
