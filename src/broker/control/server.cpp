#include "broker/control/server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "common/thread_name.h"
#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;
constexpr int kClientTimeoutMs = 5000;

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw std::invalid_argument("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

bool send_line(int fd, const json& value) {
  std::string line = value.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads one '\n'-terminated line of at most `max` bytes, waiting at most
// timeout_ms for each chunk. Leftover bytes stay in `buffer`.
bool read_line(int fd, std::string& buffer, std::string& line, size_t max, int timeout_ms) {
  while (true) {
    size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    if (buffer.size() > max) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    char chunk[4096];
    ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

json error_reply(const std::string& message, const std::string& path = "") {
  json e = {{"message", message}};
  if (!path.empty()) e["path"] = path;
  return {{"ok", false}, {"error", e}};
}

int connect_to(const std::string& socket_path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_un addr = unix_address(socket_path);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot reach zerod at " + socket_path + ": " + std::strerror(err));
  }
  return fd;
}

}  // namespace

ControlServer::ControlServer(std::string socket_path, uid_t allowed_uid)
    : path_(std::move(socket_path)), allowed_uid_(allowed_uid) {}

ControlServer::~ControlServer() { stop(); }

void ControlServer::handle(const std::string& verb, Handler handler) {
  handlers_[verb] = [h = std::move(handler)](const json& args, const ControlCaller&) { return h(args); };
}
void ControlServer::handle_with_caller(const std::string& verb, CallerHandler handler) {
  handlers_[verb] = std::move(handler);
}
void ControlServer::stream(const std::string& verb, StreamHandler handler) {
  streams_[verb] = std::move(handler);
}

void ControlServer::start() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path_).parent_path();
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0700);
  ::unlink(path_.c_str());  // a stale socket of a previous run
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::system_error(errno, std::generic_category(), "control socket");
  sockaddr_un addr = unix_address(path_);
  // The socket is born 0600: no window where another user could connect.
  mode_t old = ::umask(0177);
  int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0 || ::listen(listen_fd_, 16) != 0)
    throw std::system_error(errno, std::generic_category(), "bind/listen " + path_);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] {
    set_thread_name("zn-control");
    serve();
  });
}

void ControlServer::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  uint64_t one = 1;
  (void)::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  {
    std::lock_guard lock(clients_mu_);
    for (Client& c : clients_) ::shutdown(c.fd, SHUT_RDWR);  // wakes blocked reads and writes
  }
  for (Client& c : clients_) c.thread.join();
  for (Client& c : clients_) ::close(c.fd);
  clients_.clear();
  ::close(listen_fd_);
  ::close(stop_fd_);
  ::unlink(path_.c_str());
}

void ControlServer::reap_finished_clients() {
  std::lock_guard lock(clients_mu_);
  for (auto it = clients_.begin(); it != clients_.end();) {
    if (!it->done) {
      ++it;
      continue;
    }
    it->thread.join();
    ::close(it->fd);
    it = clients_.erase(it);
  }
}

void ControlServer::serve() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (::poll(fds, 2, 1000) < 0) continue;
    reap_finished_clients();
    if (fds[1].revents) break;
    if (!fds[0].revents) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(clients_mu_);
    if (clients_.size() >= kMaxClients) {
      send_line(fd, error_reply("busy: too many control connections"));
      ::close(fd);
      continue;
    }
    Client& c = clients_.emplace_back();
    c.fd = fd;
    c.thread = std::thread([this, &c] {
      serve_client(c.fd);
      c.done = true;
    });
  }
}

void ControlServer::serve_client(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != allowed_uid_) {
    send_line(fd, error_reply("permission denied: the control socket is for root"));
    return;
  }
  std::string buffer, line;
  if (!read_line(fd, buffer, line, kMaxRequestBytes, kClientTimeoutMs)) {
    send_line(fd, error_reply("no request line (or one larger than 1 MiB) within 5 s"));
    return;
  }
  json request;
  try {
    request = json::parse(line);
  } catch (const json::exception&) {
    send_line(fd, error_reply("request is not JSON"));
    return;
  }
  if (!request.is_object() || !request.contains("verb") || !request["verb"].is_string()) {
    send_line(fd, error_reply("request needs a \"verb\" string"));
    return;
  }
  const std::string verb = request["verb"];
  const json args = request.value("args", json::object());
  if (!args.is_object()) {
    send_line(fd, error_reply("\"args\" must be an object"));
    return;
  }
  if (auto s = streams_.find(verb); s != streams_.end()) {
    if (!send_line(fd, {{"ok", true}, {"result", {{"streaming", verb}}}})) return;
    s->second(
        args, [fd](const json& value) { return send_line(fd, value); }, stopping_);
    return;
  }
  auto h = handlers_.find(verb);
  if (h == handlers_.end()) {
    send_line(fd, error_reply("unknown verb '" + verb + "'"));
    return;
  }
  try {
    send_line(fd, {{"ok", true}, {"result", h->second(args, ControlCaller{cred.uid, cred.pid})}});
  } catch (const PolicyError& e) {
    send_line(fd, error_reply(e.what(), e.path()));
  } catch (const std::exception& e) {
    send_line(fd, error_reply(e.what()));
  }
}

json control_call(const std::string& socket_path, const std::string& verb, const json& args) {
  int fd = connect_to(socket_path);
  std::string buffer, line;
  bool ok = send_line(fd, {{"verb", verb}, {"args", args}}) && read_line(fd, buffer, line, 64 << 20, 120000);
  ::close(fd);
  if (!ok) throw std::runtime_error("zerod closed the control connection");
  try {
    return json::parse(line);
  } catch (const json::exception&) {
    throw std::runtime_error("zerod sent a reply that is not JSON");
  }
}

void control_stream(const std::string& socket_path, const std::string& verb, const json& args,
                    const std::function<bool(const json&)>& on_line) {
  int fd = connect_to(socket_path);
  std::string buffer, line;
  if (send_line(fd, {{"verb", verb}, {"args", args}})) {
    while (read_line(fd, buffer, line, 1 << 20, 1000 * 3600)) {
      json value;
      try {
        value = json::parse(line);
      } catch (const json::exception&) {
        break;
      }
      if (!on_line(value)) break;
    }
  }
  ::close(fd);
}

}  // namespace zn::broker
