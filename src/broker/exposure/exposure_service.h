// Declared ports of sessions (issue 14), end to end: the datapath entry
// (SessionRegistry::set_exposed), the host listener (ingress::ExposureServer)
// and the tickets (TicketBook), changed together so that none is left
// behind when another fails. The control plane's: calls block (binding a
// listener, the state file), never on a data path.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/exposure/ingress_broker.h"
#include "broker/exposure/ticket_book.h"
#include "broker/session/registry.h"
#include "userspace/ingress/exposure_server.h"

namespace zn::broker {

struct ExposureServiceOptions {
  std::string listen_address = "127.0.0.1";  // where zerod's listeners bind
  std::chrono::seconds ticket_ttl{300};      // a ticket's default life
  std::chrono::seconds max_ticket_ttl{86400};
  IngressBrokerOptions broker;
  ingress::ExposureServerConfig server;
};

struct ExposeRequest {
  std::string session;
  uint16_t port = 0;
  bool public_mode = false;
  unsigned family = 4;
  uint16_t listen_port = 0;  // 0: the one it had, else any free
};

class ExposureService {
 public:
  ExposureService(SessionRegistry& registry, AuditLog& audit, ExposureServiceOptions options);
  // Listeners closed and connections cut first. Not on the ingress loop.
  ~ExposureService();

  // Each throws SessionError (the operator's mistake) or std::system_error
  // (a listen address in use).
  nlohmann::json expose(const ExposeRequest& request);
  nlohmann::json unexpose(const std::string& session, uint16_t port);
  nlohmann::json ticket(const std::string& session, uint16_t port, std::optional<std::chrono::seconds> ttl);
  nlohmann::json list(const std::string& session) const;
  // A deleted session's listeners and tickets (its datapath entry goes with it).
  void forget_session(const std::string& session);
  // At start: listeners for every restored session's declared ports, on
  // the ports they had. Returns what could not be reopened (logged, audited
  // by the caller); those ports stay declared and closed.
  std::vector<std::string> reopen_all();

 private:
  nlohmann::json describe(const std::string& session, uint16_t port, const ExposedPort& e) const;

  SessionRegistry& registry_;
  AuditLog& audit_;
  ExposureServiceOptions options_;
  TicketBook tickets_;
  IngressBroker broker_;
  ingress::ExposureServer server_;  // last: stopped before what it calls back into
};

}  // namespace zn::broker
