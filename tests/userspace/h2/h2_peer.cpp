#include "h2_peer.h"

#include <cstring>
#include <stdexcept>

namespace zn::h2::test {

namespace {

NgPeer& self(void* user_data) { return *static_cast<NgPeer*>(user_data); }

int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
              const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
  self(user_data).streams[frame->hd.stream_id].headers.emplace_back(
      std::string(reinterpret_cast<const char*>(name), namelen),
      std::string(reinterpret_cast<const char*>(value), valuelen));
  return 0;
}

int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  NgPeer& p = self(user_data);
  if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
      (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
    p.streams[frame->hd.stream_id].ended = true;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
      nghttp2_session_check_server_session(session))
    p.requests_seen.push_back(frame->hd.stream_id);
  if (frame->hd.type == NGHTTP2_RST_STREAM)
    p.streams[frame->hd.stream_id].rst_received = frame->rst_stream.error_code;
  if (frame->hd.type == NGHTTP2_GOAWAY) p.goaway_code = frame->goaway.error_code;
  return 0;
}

int on_data(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len, void* user_data) {
  self(user_data).streams[stream_id].body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int on_close(nghttp2_session*, int32_t stream_id, uint32_t code, void* user_data) {
  auto& s = self(user_data).streams[stream_id];
  s.closed = true;
  s.close_code = code;
  return 0;
}

}  // namespace

std::vector<nghttp2_nv> to_nv(const Fields& fields) {
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : fields)
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                   NGHTTP2_NV_FLAG_NONE});
  return nva;
}

std::string find_field(const Fields& fields, const std::string& name) {
  for (const auto& [n, v] : fields)
    if (n == name) return v;
  return "";
}

NgPeer::NgPeer(Role role) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // The tests send header blocks past the session's limits on purpose.
  nghttp2_option_set_max_send_header_block_length(opt, 1 << 20);
  const int rv = role == Role::kClient ? nghttp2_session_client_new2(&session_, cb, this, opt)
                                       : nghttp2_session_server_new2(&session_, cb, this, opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);
  if (rv != 0) throw std::runtime_error("nghttp2 peer");
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
}

NgPeer::~NgPeer() { nghttp2_session_del(session_); }

ssize_t NgPeer::read_body(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user_data) {
  NgPeer& p = self(user_data);
  Body& b = p.bodies_[stream_id];
  const size_t n = std::min(length, b.bytes.size() - b.at);
  std::memcpy(buf, b.bytes.data() + b.at, n);
  b.at += n;
  if (b.at == b.bytes.size()) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!b.trailers.empty()) {
      auto nva = to_nv(b.trailers);
      nghttp2_submit_trailer(session, stream_id, nva.data(), nva.size());
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
  }
  return static_cast<ssize_t>(n);
}

nghttp2_data_provider NgPeer::provider(int32_t stream_id, std::string body, const Fields& trailers) {
  Body& b = stream_id == 0 ? pending_ : bodies_[stream_id];
  b = Body{std::move(body), 0, trailers};
  nghttp2_data_provider prd{};
  prd.read_callback = read_body;
  return prd;
}

int32_t NgPeer::request(const Fields& fields, std::optional<std::string> body) {
  auto nva = to_nv(fields);
  if (!body) return nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), nullptr, nullptr);
  nghttp2_data_provider prd = provider(0, std::move(*body), {});
  const int32_t id = nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), &prd, nullptr);
  if (id > 0) bodies_[id] = std::move(pending_);
  return id;
}

void NgPeer::respond(int32_t stream_id, const Fields& fields, std::optional<std::string> body,
                     const Fields& trailers) {
  auto nva = to_nv(fields);
  if (!body) {
    nghttp2_submit_response(session_, stream_id, nva.data(), nva.size(), nullptr);
    return;
  }
  nghttp2_data_provider prd = provider(stream_id, std::move(*body), trailers);
  nghttp2_submit_response(session_, stream_id, nva.data(), nva.size(), &prd);
}

void NgPeer::reset(int32_t stream_id, uint32_t code) {
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, code);
}

std::string NgPeer::take_output() {
  std::string out;
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) break;
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  return out;
}

long NgPeer::feed(const std::string& bytes) {
  return static_cast<long>(
      nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace zn::h2::test
