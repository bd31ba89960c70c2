// The host side of declared ports (znctl session expose): one listener per
// (session, port) on an address of the host's choosing, never on the guest's
// link. A client's connection is admitted by the IngressPolicy (a one-time
// ticket or its binding in ticket mode; anyone in public mode) and then
// relayed to the guest over a connection from the gateway address marked
// ZN_MARK_EXPOSE, the only mark the TAP's programs let inward, and only to
// declared ports. Everything else gets 403 and reaches nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "userspace/ingress/policy.h"

namespace zn::ingress {

struct ExposureServerConfig {
  std::chrono::milliseconds head_timeout{10000};  // the first request head (ticket mode)
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(5)};
  // Admitted or not, at once over every listener: beyond it, a new client
  // is closed at accept.
  size_t max_connections = 512;
};

struct ExposureSpec {
  std::string session;
  uint16_t port = 0;  // the guest's
  ExposureMode mode = ExposureMode::kTicket;
  std::string listen_address = "127.0.0.1";
  uint16_t listen_port = 0;  // 0 picks one
};

class ExposureServer {
 public:
  // Starts the loop thread. Any thread.
  ExposureServer(ExposureServerConfig config, IngressPolicy& policy);
  // Closes every listener and connection; joins the loop. Not on the loop.
  ~ExposureServer();
  ExposureServer(const ExposureServer&) = delete;
  ExposureServer& operator=(const ExposureServer&) = delete;

  // Binds the listener (in the calling thread's netns) and starts accepting;
  // replaces one already open for (session, port). Returns the bound port.
  // Throws std::system_error (address in use, bad address). Not on the loop.
  uint16_t open(const ExposureSpec& spec);
  // Closes the listener and cuts its connections; returns once done.
  // Not on the loop.
  void close(const std::string& session, uint16_t port);
  void close_session(const std::string& session);
  // Connections being served now (tests, metrics). Any thread.
  size_t live_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zn::ingress
