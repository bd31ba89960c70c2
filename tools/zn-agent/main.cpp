// zn-agent: the in-sandbox agent (issue 15). Listens on its one transport
// (a TCP address: in a lab guest or a VM, the datapath lets only zerod's own
// marked connection reach it) and serves each connection one signed
// envelope (userspace/command/agent.h). zerod's public key is pinned at
// start; nothing it is sent runs before it verifies.
//
//   zn-agent --session ID --key HEX|--key-file FILE [--listen 0.0.0.0:7070]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <sodium.h>

#include "userspace/command/agent.h"

namespace {

constexpr int kMaxConnections = 16;

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "zn-agent: %s\nusage: zn-agent --session ID --key HEX|--key-file FILE [--listen ADDR:PORT]\n",
               why.c_str());
  std::exit(2);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string session, key_hex, listen = "0.0.0.0:7070";
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
    } else if (a == "--listen")
      listen = v;
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
  ::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "zn-agent: session %s, listening on %s\n", session.c_str(), listen.c_str());
  std::fflush(stderr);

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
      // What ran or why not; never a body, argv or file contents.
      std::fprintf(stderr, "zn-agent: %s %s%s\n", o.type.empty() ? "-" : o.type.c_str(),
                   o.ran ? "ran" : "refused: ", o.ran ? "" : o.reason.c_str());
      std::fflush(stderr);
      --live;
    }).detach();
  }
}
