// nghttp2's C callbacks for SessionCore (session_core.h): where the
// bounds are counted as frames arrive, header blocks and DATA frames are
// collected per stream, and buffered bodies are handed to nghttp2 as the
// peer's window allows. Internal to zn_h2.
#pragma once

#include <nghttp2/nghttp2.h>

#include <string>
#include <vector>

#include "userspace/h2/h2_limits.h"
#include "userspace/h2/session_core.h"

namespace zn::h2 {

struct SessionCore::Callbacks {
  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user_data);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame* frame, int lib_error_code,
                                   void* user_data);
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user_data);
  static int on_data_chunk_recv(nghttp2_session* session, uint8_t, int32_t stream_id, const uint8_t* data,
                                size_t len, void* user_data);
  static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t error_code, void* user_data);
  static int on_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static ssize_t read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source*, void* user_data);
};

// `fields` as nghttp2 name/value pairs (pointing into `fields`).
std::vector<nghttp2_nv> to_nv(const std::vector<Field>& fields);
// "more than N <what> in W ms", a LimitTripped detail.
std::string over_rate(const RateBound& bound, const char* what);

}  // namespace zn::h2
