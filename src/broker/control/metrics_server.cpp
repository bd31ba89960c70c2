#include "broker/control/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

namespace zn::broker {
namespace {

void send_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string response(int code, const char* status, const std::string& type, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(code) + " " + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

std::string prometheus_line(const std::string& name,
                            const std::vector<std::pair<std::string, std::string>>& labels, uint64_t value) {
  std::string out = name;
  if (!labels.empty()) {
    out += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out += ",";
      out += labels[i].first + "=\"";
      for (char c : labels[i].second) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
          out += "\\n";
          continue;
        }
        out += c;
      }
      out += "\"";
    }
    out += "}";
  }
  return out + " " + std::to_string(value) + "\n";
}

MetricsServer::MetricsServer(uint16_t port, Render render) : render_(std::move(render)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "metrics socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw std::system_error(err, std::generic_category(),
                            "metrics listen on 127.0.0.1:" + std::to_string(port));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { serve(); });
}

MetricsServer::~MetricsServer() {
  uint64_t one = 1;
  (void)::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
}

void MetricsServer::serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents) return;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // The request line is all we need; read what arrives within 2 s, at most 8 KiB.
    std::string request;
    char buf[2048];
    while (request.find("\r\n") == std::string::npos && request.size() < 8192) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) <= 0) break;
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    if (request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics\r", 0) == 0)
      send_all(fd, response(200, "OK", "text/plain; version=0.0.4", render_()));
    else
      send_all(fd, response(404, "Not Found", "text/plain", "try /metrics\n"));
    ::close(fd);
  }
}

}  // namespace zn::broker
