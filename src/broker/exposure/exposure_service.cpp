#include "broker/exposure/exposure_service.h"

#include <spdlog/spdlog.h>

#include "broker/audit/event.h"

namespace zn::broker {
namespace {

std::string host_port(const std::string& address, uint16_t port) {
  const bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

std::string format_time(std::chrono::system_clock::time_point t) { return format_audit_ts(t); }

}  // namespace

ExposureService::ExposureService(SessionRegistry& registry, AuditLog& audit, ExposureServiceOptions options)
    : registry_(registry),
      audit_(audit),
      options_(std::move(options)),
      broker_(registry, tickets_, audit, options_.broker),
      server_(options_.server, broker_) {}

ExposureService::~ExposureService() {
  // What the last second gathered (the server's tick may run meanwhile: the
  // throttle hands each count out once).
  broker_.flush_refusals();
}

nlohmann::json ExposureService::describe(const std::string& session, uint16_t port,
                                         const ExposedPort& e) const {
  (void)session;
  return {{"port", port},
          {"proto", "tcp"},
          {"mode", e.public_mode ? "public" : "ticket"},
          {"family", e.family},
          {"listen", host_port(options_.listen_address, e.listen_port)}};
}

nlohmann::json ExposureService::expose(const ExposeRequest& r) {
  const SessionPtr s = registry_.get(r.session);
  if (!s) throw SessionError("no session '" + r.session + "'");
  if (r.port == 0) throw SessionError("port 0 cannot be exposed");
  if (r.family != 4 && r.family != 6) throw SessionError("family must be 4 or 6");
  ExposedPort e;
  e.public_mode = r.public_mode;
  e.family = r.family;
  e.listen_port = r.listen_port;
  if (auto it = s->record.exposed.find(r.port); it != s->record.exposed.end() && r.listen_port == 0)
    e.listen_port = it->second.listen_port;
  // The listener first, so a port in use fails before anything changed.
  ingress::ExposureSpec spec;
  spec.session = r.session;
  spec.port = r.port;
  spec.mode = e.public_mode ? ingress::ExposureMode::kPublic : ingress::ExposureMode::kTicket;
  spec.listen_address = options_.listen_address;
  spec.listen_port = e.listen_port;
  try {
    e.listen_port = server_.open(spec);
  } catch (const std::system_error& err) {
    throw SessionError("cannot listen on " + host_port(options_.listen_address, spec.listen_port) + ": " +
                       err.code().message());
  }
  try {
    registry_.set_exposed(r.session, r.port, e);
  } catch (...) {
    server_.close(r.session, r.port);
    throw;
  }
  spdlog::info("session {} port {} exposed ({}) on {}", r.session, r.port,
               e.public_mode ? "public" : "ticket", host_port(options_.listen_address, e.listen_port));
  nlohmann::json out = describe(r.session, r.port, e);
  out["session"] = r.session;
  return out;
}

nlohmann::json ExposureService::unexpose(const std::string& session, uint16_t port) {
  // The datapath closes first: nothing reaches in once this returns.
  registry_.set_exposed(session, port, std::nullopt);
  server_.close(session, port);
  tickets_.forget(session, port);
  spdlog::info("session {} port {} no longer exposed", session, port);
  return {{"session", session}, {"port", port}, {"exposed", false}};
}

nlohmann::json ExposureService::ticket(const std::string& session, uint16_t port,
                                       std::optional<std::chrono::seconds> ttl) {
  const SessionPtr s = registry_.get(session);
  if (!s) throw SessionError("no session '" + session + "'");
  auto it = s->record.exposed.find(port);
  if (it == s->record.exposed.end())
    throw SessionError("port " + std::to_string(port) + " of session '" + session + "' is not exposed");
  if (it->second.public_mode)
    throw SessionError("port " + std::to_string(port) + " of session '" + session +
                       "' is public: no ticket needed");
  const std::chrono::seconds life = ttl.value_or(options_.ticket_ttl);
  if (life.count() < 1 || life > options_.max_ticket_ttl)
    throw SessionError("ttl must be 1.." + std::to_string(options_.max_ticket_ttl.count()) + " seconds");
  MintedTicket t;
  try {
    t = tickets_.mint(session, port, life);
  } catch (const std::runtime_error& e) {
    throw SessionError(e.what());
  }
  audit_.post({"ingress:ticket",
               session,
               {{"port", port}, {"ttl_s", life.count()}, {"expires", format_time(t.expires)}}});
  const std::string listen = host_port(options_.listen_address, it->second.listen_port);
  return {{"session", session},
          {"port", port},
          {"ticket", t.ticket},
          {"expires", format_time(t.expires)},
          {"listen", listen},
          {"url", "http://" + listen + "/_zn/" + t.ticket + "/"},
          {"header", "Zn-Ticket: " + t.ticket}};
}

nlohmann::json ExposureService::list(const std::string& session) const {
  const SessionPtr s = registry_.get(session);
  if (!s) throw SessionError("no session '" + session + "'");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [port, e] : s->record.exposed) {
    nlohmann::json d = describe(session, port, e);
    if (!e.public_mode) d["tickets_outstanding"] = tickets_.outstanding(session);
    out.push_back(std::move(d));
  }
  return out;
}

void ExposureService::forget_session(const std::string& session) {
  server_.close_session(session);
  tickets_.forget_session(session);
}

std::vector<std::string> ExposureService::reopen_all() {
  std::vector<std::string> failed;
  for (const SessionPtr& s : registry_.list()) {
    for (const auto& [port, e] : s->record.exposed) {
      ingress::ExposureSpec spec;
      spec.session = s->record.id;
      spec.port = port;
      spec.mode = e.public_mode ? ingress::ExposureMode::kPublic : ingress::ExposureMode::kTicket;
      spec.listen_address = options_.listen_address;
      spec.listen_port = e.listen_port;
      try {
        server_.open(spec);
      } catch (const std::exception& err) {
        failed.push_back(s->record.id + " port " + std::to_string(port) + ": " + err.what());
      }
    }
  }
  return failed;
}

}  // namespace zn::broker
