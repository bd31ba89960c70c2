// zerod's control socket: a Unix stream socket (mode 0600 in a 0700 dir)
// where root — checked with SO_PEERCRED — sends one JSON request per line
// and reads JSON lines back:
//   -> {"verb":"session.list","args":{}}
//   <- {"ok":true,"result":...}   or   {"ok":false,"error":{"message":...,"path":...}}
// Streaming verbs (events) keep writing lines until the client hangs up.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace zn::broker {

// Who sent a request: the peer's credentials as the kernel reports them
// (SO_PEERCRED), for verbs that record who decided (approvals, grants).
struct ControlCaller {
  uid_t uid = 0;
  pid_t pid = 0;
};

class ControlServer {
 public:
  // Returns the result; throws to answer an error (PolicyError keeps its path).
  using Handler = std::function<nlohmann::json(const nlohmann::json& args)>;
  // The same, told who is calling.
  using CallerHandler =
      std::function<nlohmann::json(const nlohmann::json& args, const ControlCaller& caller)>;
  // Writes lines with `emit` until it returns false (client gone) or stop.
  using StreamHandler =
      std::function<void(const nlohmann::json& args, const std::function<bool(const nlohmann::json&)>& emit,
                         const std::atomic<bool>& stopping)>;

  static constexpr size_t kMaxRequestBytes = 1 << 20;
  static constexpr size_t kMaxClients = 32;

  explicit ControlServer(std::string socket_path, uid_t allowed_uid = 0);
  ~ControlServer();  // stops

  void handle(const std::string& verb, Handler handler);
  void handle_with_caller(const std::string& verb, CallerHandler handler);
  void stream(const std::string& verb, StreamHandler handler);
  void start();  // binds and serves on a thread; throws if the socket cannot be made
  void stop();

 private:
  void serve();
  void serve_client(int fd);
  void reap_finished_clients();

  // Each client gets a thread, so a streaming `events` or a slow client
  // never holds up the others.
  struct Client {
    int fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  std::string path_;
  uid_t allowed_uid_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::map<std::string, CallerHandler> handlers_;
  std::map<std::string, StreamHandler> streams_;
  std::thread thread_;
  std::mutex clients_mu_;
  std::list<Client> clients_;
};

// The client side, for znctl and tests. Throws std::runtime_error when the
// daemon cannot be reached.
nlohmann::json control_call(const std::string& socket_path, const std::string& verb,
                            const nlohmann::json& args = nlohmann::json::object());
// Reads streamed lines, calling on_line until it returns false or the daemon hangs up.
void control_stream(const std::string& socket_path, const std::string& verb, const nlohmann::json& args,
                    const std::function<bool(const nlohmann::json&)>& on_line);

}  // namespace zn::broker
