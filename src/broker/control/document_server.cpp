#include "broker/control/document_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
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

DocumentServer::DocumentServer(const std::string& address, uint16_t port, std::vector<Document> documents)
    : documents_(std::move(documents)) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1)
    throw std::invalid_argument("not an IPv4 address: '" + address + "'");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "document server socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    int err = errno;
    ::close(listen_fd_);
    throw std::system_error(err, std::generic_category(),
                            "listen on " + address + ":" + std::to_string(port));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { serve(); });
}

DocumentServer::~DocumentServer() {
  uint64_t one = 1;
  (void)::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  ::close(listen_fd_);
  ::close(stop_fd_);
}

void DocumentServer::serve() {
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
    const Document* found = nullptr;
    for (const Document& d : documents_)
      if (request.rfind("GET " + d.path + " ", 0) == 0 || request.rfind("GET " + d.path + "\r", 0) == 0)
        found = &d;
    if (found) {
      std::string body;
      try {
        body = found->render();
      } catch (const std::exception&) {
        send_all(fd, response(503, "Service Unavailable", "text/plain", "unavailable\n"));
        ::close(fd);
        continue;
      }
      send_all(fd, response(200, "OK", found->content_type, body));
    } else {
      send_all(fd, response(404, "Not Found", "text/plain", "try " + documents_.front().path + "\n"));
    }
    ::close(fd);
  }
}

}  // namespace zn::broker
