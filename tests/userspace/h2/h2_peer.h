// A real nghttp2 endpoint in memory, the other side of the session under
// test: a client for H2ServerSession, a server for H2ClientSession. It
// records what it received per stream and sends what the test asks.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zn::h2::test {

using Fields = std::vector<std::pair<std::string, std::string>>;

class NgPeer {
 public:
  enum class Role { kClient, kServer };
  explicit NgPeer(Role role);
  ~NgPeer();
  NgPeer(const NgPeer&) = delete;
  NgPeer& operator=(const NgPeer&) = delete;

  struct StreamSeen {
    Fields headers;  // every header block, in order (informational, final, trailers)
    std::string body;
    bool ended = false;  // END_STREAM received
    bool closed = false;
    uint32_t close_code = 0;
    std::optional<uint32_t> rst_received;
  };

  // Client: opens a stream (body: sent then END_STREAM). Returns its id.
  int32_t request(const Fields& fields, std::optional<std::string> body = std::nullopt);
  // Server: answers a stream.
  void respond(int32_t stream_id, const Fields& fields, std::optional<std::string> body = std::nullopt,
               const Fields& trailers = {});
  void reset(int32_t stream_id, uint32_t code);

  // Bytes for the session under test / from it. feed returns nghttp2's rv.
  std::string take_output();
  long feed(const std::string& bytes);

  nghttp2_session* session() { return session_; }
  std::map<int32_t, StreamSeen> streams;
  std::vector<int32_t> requests_seen;  // server: streams whose request headers arrived, in order
  std::optional<uint32_t> goaway_code;

 private:
  struct Body {
    std::string bytes;
    size_t at = 0;
    Fields trailers;
  };
  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*, nghttp2_data_source*,
                           void*);
  nghttp2_data_provider provider(int32_t stream_id_or_0, std::string body, const Fields& trailers);

  nghttp2_session* session_ = nullptr;
  std::map<int32_t, Body> bodies_;
  Body pending_;  // a client's body before nghttp2 assigns the stream id
};

std::vector<nghttp2_nv> to_nv(const Fields& fields);
std::string find_field(const Fields& fields, const std::string& name);

}  // namespace zn::h2::test
