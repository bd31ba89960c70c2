// A few documents over plain HTTP: zerod's Prometheus metrics on loopback,
// and its JWKS where lab upstreams (or any receiver of its minted tokens)
// can fetch it. Small on purpose: one thread, one request per connection,
// the request line only (2 s, 8 KiB at most), GET of fixed paths.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace zn::broker {

class DocumentServer {
 public:
  struct Document {
    std::string path;  // "/metrics"
    std::string content_type;
    std::function<std::string()> render;  // called on the server's thread; a throw answers 503
  };
  // Binds address:port (IPv4; port 0 picks a free one, for tests). Throws
  // std::invalid_argument for a bad address, std::system_error on failure.
  DocumentServer(const std::string& address, uint16_t port, std::vector<Document> documents);
  ~DocumentServer();
  DocumentServer(const DocumentServer&) = delete;
  DocumentServer& operator=(const DocumentServer&) = delete;
  uint16_t port() const { return port_; }

 private:
  void serve();
  int listen_fd_ = -1, stop_fd_ = -1;
  uint16_t port_ = 0;
  std::vector<Document> documents_;
  std::thread thread_;
};

}  // namespace zn::broker
