#include "userspace/h2/client_session.h"

#include <nghttp2/nghttp2.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "userspace/h2/fields.h"

namespace zn::h2 {

H2ClientSession::H2ClientSession(ClientOptions options) : SessionCore(/*server=*/false, options) {
  const H2Limits& l = limits();
  std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, l.max_header_list_bytes},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, l.hpack_table_bytes},
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, l.max_frame_bytes},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (options.stream_window > 0)
    settings.push_back({NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options.stream_window});
  int rv = nghttp2_submit_settings(session(), NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  if (rv != 0) throw std::runtime_error(std::string("nghttp2 SETTINGS: ") + nghttp2_strerror(rv));
  if (options.connection_window > 0) {
    rv = nghttp2_session_set_local_window_size(session(), NGHTTP2_FLAG_NONE, 0,
                                               static_cast<int32_t>(options.connection_window));
    if (rv != 0) throw std::runtime_error(std::string("nghttp2 window: ") + nghttp2_strerror(rv));
  }
}

uint32_t H2ClientSession::peer_max_concurrent_streams() {
  return nghttp2_session_get_remote_settings(session(), NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

bool H2ClientSession::request_allowed() { return nghttp2_session_check_request_allowed(session()) != 0; }

int32_t H2ClientSession::submit_request(std::string_view method, std::string_view scheme,
                                        std::string_view authority, std::string_view path,
                                        const std::vector<Field>& headers, bool has_body) {
  std::vector<Field> fields;
  if (to_h2_fields(headers, fields) != nullptr) return NGHTTP2_ERR_INVALID_ARGUMENT;
  if (method.empty() || authority.empty()) return NGHTTP2_ERR_INVALID_ARGUMENT;
  // After the upstream's GOAWAY nghttp2 would accept the stream and fail it
  // only when writing; say so now.
  if (nghttp2_session_check_request_allowed(session()) == 0) return NGHTTP2_ERR_START_STREAM_NOT_ALLOWED;
  std::vector<Field> block = {{":method", std::string(method)}};
  if (!scheme.empty()) block.push_back({":scheme", std::string(scheme)});
  block.push_back({":authority", std::string(authority)});
  if (!path.empty()) block.push_back({":path", std::string(path)});
  for (Field& f : fields) block.push_back(std::move(f));
  return submit_request_block(block, has_body);
}

void H2ClientSession::on_header_block(int32_t stream_id, Stream& stream, int category, bool end_stream) {
  if (stream.block_too_large) {
    // The upstream's answer cannot be held: this stream fails, the
    // connection (and the other streams) go on.
    trip_stream(Limit::header_list_size, stream_id,
                "response headers over " + std::to_string(limits().max_header_list_bytes) + " bytes");
    stream.rejected = true;
    reset_stream(stream_id, NGHTTP2_CANCEL);
    return;
  }
  if (stream.rejected) return;
  std::vector<Field> headers;
  const int status = read_response_block(std::move(stream.block), headers);
  // nghttp2 reports a final response after 1xx ones as HCAT_HEADERS too;
  // trailers are the block after a final status (and end the stream).
  if (category == NGHTTP2_HCAT_HEADERS && stream.announced) {
    events_.emplace_back(ResponseTrailers{stream_id, std::move(headers)});
    return;
  }
  if (status >= 200) stream.announced = true;
  events_.emplace_back(ResponseHeaders{stream_id, status, std::move(headers), end_stream});
}

void H2ClientSession::on_data_frame(int32_t stream_id, Stream&, std::string bytes, bool end_stream) {
  events_.emplace_back(ResponseData{stream_id, std::move(bytes), end_stream});
}

void H2ClientSession::on_stream_closed(int32_t stream_id, Stream& stream, uint32_t error_code) {
  // Every stream here is one the caller opened: it hears of any abnormal end.
  if (error_code != NGHTTP2_NO_ERROR || !stream.local_ended || !stream.announced)
    events_.emplace_back(StreamReset{stream_id, error_code});
}

}  // namespace zn::h2
