// zn-agent: the in-sandbox agent (issue 15). Serves its one transport, one
// signed envelope per exchange (userspace/command/agent.h): in a QEMU
// microVM the virtio-serial ports named PREFIX.N (--virtio PREFIX:
// userspace/command/virtio_port.h), in a lab guest a TCP address the
// datapath lets only zerod's own marked connection reach (--listen). zerod's public key is pinned at
// start; nothing it is sent runs before it verifies. Every reply is sealed
// under the session's result key, which only this process (and zerod) know.
//
//   zn-agent --config FILE [--listen 0.0.0.0:7070 | --virtio PREFIX] [--ready-file F]
//            [--exec-uid N [--exec-gid N]]
//   zn-agent --session ID --key HEX|--key-file FILE --result-key-file FILE ...
//
// FILE (what `znctl agent provision ID` prints, or /zn/agent.conf in a
// microVM) holds ZN_SESSION=, ZN_COMMAND_KEY= (public) and ZN_RESULT_KEY=
// (secret) lines; it must be readable by its owner alone. A rekey rewrites
// its ZN_COMMAND_KEY, so a restarted agent keeps the key zerod rotated to.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sodium.h>

#include "userspace/command/agent.h"
#include "userspace/command/virtio_port.h"

namespace {

constexpr int kMaxConnections = 16;

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "zn-agent: %s\nusage: zn-agent --config FILE [--listen ADDR:PORT | --virtio PREFIX] "
               "[--ready-file FILE]\n"
               "                [--exec-uid N [--exec-gid N]]\n"
               "       zn-agent --session ID --key HEX|--key-file FILE --result-key-file FILE [...]\n",
               why.c_str());
  std::exit(2);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

int64_t id_number(const std::string& v) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n > 0xfffffffeull) usage("a uid or gid must be a number: " + v);
  return static_cast<int64_t>(n);
}

// A file holding a secret: ours, and nobody else's to read.
std::string read_private(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) usage("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077))
    usage(path + " must be a regular file of ours, mode 0600 or tighter (it holds the result key)");
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) usage("cannot read " + path);
  return ss.str();
}

std::map<std::string, std::string> parse_config(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) usage("config line without '='");
    out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// The config file again with its command key replaced: whole or not at all.
void persist_command_key(const std::string& path, const zn::command::PublicKey& key) {
  char hex[2 * zn::command::kPublicKeySize + 1];
  sodium_bin2hex(hex, sizeof hex, key.data(), key.size());
  std::map<std::string, std::string> values = parse_config(read_private(path));
  values["ZN_COMMAND_KEY"] = hex;
  const std::string tmp = path + ".rekey";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(std::string("cannot write ") + tmp + ": " + std::strerror(errno));
  std::string text;
  for (const auto& [k, v] : values) text += k + "=" + v + "\n";
  const bool ok =
      ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot replace " + path);
  }
}

}  // namespace

// What ran or why not; never a body, argv or file contents.
void log_exchange(const zn::command::ServeOutcome& o) {
  std::fprintf(stderr, "zn-agent: %s %s%s\n", o.type.empty() ? "-" : o.type.c_str(),
               o.ran ? "ran" : "refused: ", o.ran ? "" : o.reason.c_str());
  std::fflush(stderr);
}

// Marks the agent ready (its transport open) for whoever started it.
void mark_ready(const std::string& path) {
  if (path.empty()) return;
  std::ofstream(path) << "ready\n";
}

// Every port named PREFIX.N, each served by a thread of its own. The ports
// appear once virtio_console is loaded: a few seconds are allowed for that.
[[noreturn]] void serve_virtio(zn::command::Agent& agent, const std::string& prefix,
                               const std::string& ready) {
  std::vector<zn::command::VirtioPort> ports;
  for (int i = 0; i < 50 && ports.empty(); ++i) {
    ports = zn::command::find_virtio_ports(prefix);
    if (ports.empty()) ::usleep(100000);
  }
  if (ports.empty()) {
    std::fprintf(stderr, "zn-agent: no virtio-serial port named %s.N in %s\n", prefix.c_str(),
                 zn::command::kVirtioPortsDir);
    std::exit(1);
  }
  std::atomic<size_t> opened{0};
  std::atomic<bool> failed{false};
  for (const auto& port : ports) {
    std::thread([&agent, port, &opened, &failed] {
      int fd = -1;
      try {
        fd = zn::command::open_virtio_port(port.device);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "zn-agent: %s\n", e.what());
        failed = true;
        return;
      }
      ++opened;
      zn::command::serve_virtio_port(agent, fd, log_exchange);
    }).detach();
  }
  while (opened.load() < ports.size() && !failed.load()) ::usleep(10000);
  if (failed.load()) std::exit(1);
  std::fprintf(stderr, "zn-agent: session %s, serving %zu virtio-serial ports %s.N\n",
               agent.session().c_str(), ports.size(), prefix.c_str());
  std::fflush(stderr);
  mark_ready(ready);
  for (;;) ::pause();
}

int main(int argc, char** argv) {
  std::string session, key_hex, result_hex, config_path, listen = "0.0.0.0:7070", virtio, ready;
  int64_t exec_uid = -1, exec_gid = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("missing a value for " + a);
    const std::string v = argv[++i];
    if (a == "--session")
      session = v;
    else if (a == "--key")
      key_hex = v;
    else if (a == "--key-file") {
      std::ifstream in(v);
      if (!in) usage("cannot read " + v);
      std::getline(in, key_hex);
    } else if (a == "--result-key-file")
      result_hex = trim(read_private(v));
    else if (a == "--config") {
      config_path = v;
      auto values = parse_config(read_private(v));
      session = values["ZN_SESSION"];
      key_hex = values["ZN_COMMAND_KEY"];
      result_hex = values["ZN_RESULT_KEY"];
    } else if (a == "--exec-uid")
      exec_uid = id_number(v);
    else if (a == "--exec-gid")
      exec_gid = id_number(v);
    else if (a == "--listen")
      listen = v;
    else if (a == "--virtio")
      virtio = v;
    else if (a == "--ready-file")
      ready = v;
    else
      usage("unknown option " + a);
  }
  if (session.empty()) usage("missing --session");
  if (sodium_init() < 0) usage("libsodium did not initialise");
  zn::command::AgentConfig config;
  config.session = session;
  key_hex = trim(key_hex);
  size_t key_len = 0;
  if (sodium_hex2bin(config.key.data(), config.key.size(), key_hex.data(), key_hex.size(), nullptr, &key_len,
                     nullptr) != 0 ||
      key_len != config.key.size())
    usage("the key must be 64 hex digits (zerod's command key, public)");
  if (!zn::command::parse_result_key(trim(result_hex), config.result_key))
    usage("the result key must be 64 hex digits (--result-key-file, or ZN_RESULT_KEY in --config)");
  if (exec_uid >= 0 && exec_gid < 0) exec_gid = exec_uid;
  config.exec_uid = exec_uid;
  config.exec_gid = exec_gid;
  if (!config_path.empty())
    config.on_rekey = [config_path](const zn::command::PublicKey& k) { persist_command_key(config_path, k); };
  // Nobody else (a process of the workload's uid included) may trace us or
  // read our memory; core dumps would hold the result key.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  ::signal(SIGPIPE, SIG_IGN);
  // Waited for where a virtio-serial port is served, never handled; blocked
  // before any thread starts, so every thread has it blocked.
  sigset_t io;
  sigemptyset(&io);
  sigaddset(&io, SIGIO);
  ::pthread_sigmask(SIG_BLOCK, &io, nullptr);

  if (!virtio.empty()) {
    zn::command::Agent agent(config);
    serve_virtio(agent, virtio, ready);
  }

  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) usage("--listen ADDR:PORT");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const int port = std::atoi(listen.c_str() + colon + 1);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
      ::inet_pton(AF_INET, host.c_str(), &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*s4);
  } else if (auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
             ::inet_pton(AF_INET6, host.c_str(), &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*s6);
  } else {
    usage("--listen needs an IP address");
  }
  if (port <= 0 || port > 65535) usage("--listen port out of range");
  const int server = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (server < 0 || ::bind(server, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(server, 16) != 0) {
    std::fprintf(stderr, "zn-agent: cannot listen on %s: %s\n", listen.c_str(), std::strerror(errno));
    return 1;
  }
  std::fprintf(stderr, "zn-agent: session %s, listening on %s\n", session.c_str(), listen.c_str());
  std::fflush(stderr);
  mark_ready(ready);

  zn::command::Agent agent(config);
  std::atomic<int> live{0};
  for (;;) {
    const int fd = ::accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      ::usleep(100000);  // out of descriptors and the like: wait, do not spin
      continue;
    }
    if (live.load() >= kMaxConnections) {
      ::close(fd);
      continue;
    }
    ++live;
    std::thread([fd, &agent, &live] {
      const zn::command::ServeOutcome o = agent.serve(fd);
      // Closing with unread bytes (a refused envelope's rest) would reset the
      // connection and could discard the reply: end ours, drain theirs
      // (bounded), then close.
      ::shutdown(fd, SHUT_WR);
      const timeval second{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &second, sizeof(second));
      char sink[4096];
      for (int i = 0; i < 64 && ::recv(fd, sink, sizeof sink, 0) > 0; ++i) {
      }
      ::close(fd);
      if (o.reason != "no_envelope") log_exchange(o);
      --live;
    }).detach();
  }
}
