// Prometheus text exposition on a localhost port: GET /metrics answers what
// the render callback returns. Small on purpose: one thread, one request per
// connection, bounded reads, loopback only.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace zn::broker {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  // port 0 picks a free one (tests); binds 127.0.0.1 only. Throws on failure.
  MetricsServer(uint16_t port, Render render);
  ~MetricsServer();
  uint16_t port() const { return port_; }

 private:
  void serve();
  int listen_fd_ = -1, stop_fd_ = -1;
  uint16_t port_ = 0;
  Render render_;
  std::thread thread_;
};

// "name{label="value",...} number\n" with label values escaped.
std::string prometheus_line(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& labels, uint64_t value);

}  // namespace zn::broker
