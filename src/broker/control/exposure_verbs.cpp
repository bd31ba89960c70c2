#include "broker/control/exposure_verbs.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

std::string id_of(const json& args) {
  if (!args.contains("id") || !args["id"].is_string()) throw SessionError("missing \"id\" (string)");
  return args["id"].get<std::string>();
}

uint64_t unsigned_of(const json& args, const char* key, uint64_t fallback, uint64_t max) {
  if (!args.contains(key)) return fallback;
  if (!args[key].is_number_unsigned() || args[key].get<uint64_t>() > max)
    throw SessionError(std::string("\"") + key + "\" must be an integer 0.." + std::to_string(max));
  return args[key].get<uint64_t>();
}

uint16_t port_of(const json& args) {
  if (!args.contains("port")) throw SessionError("missing \"port\" (1..65535)");
  const auto port = static_cast<uint16_t>(unsigned_of(args, "port", 0, 65535));
  if (port == 0) throw SessionError("\"port\" must be 1..65535");
  return port;
}

}  // namespace

void register_exposure_verbs(ControlServer& server, ExposureService& exposures) {
  server.handle("session.expose", [&exposures](const json& args) {
    ExposeRequest r;
    r.session = id_of(args);
    r.port = port_of(args);
    if (args.contains("proto") && args["proto"] != "tcp") throw SessionError("\"proto\" must be \"tcp\"");
    if (args.contains("mode")) {
      if (args["mode"] != "ticket" && args["mode"] != "public")
        throw SessionError("\"mode\" must be \"ticket\" or \"public\"");
      r.public_mode = args["mode"] == "public";
    }
    r.family = static_cast<unsigned>(unsigned_of(args, "family", 4, 6));
    r.listen_port = static_cast<uint16_t>(unsigned_of(args, "listen_port", 0, 65535));
    return exposures.expose(r);
  });
  server.handle("session.unexpose",
                [&exposures](const json& args) { return exposures.unexpose(id_of(args), port_of(args)); });
  server.handle("session.exposed", [&exposures](const json& args) { return exposures.list(id_of(args)); });
  server.handle("session.ticket", [&exposures](const json& args) {
    std::optional<std::chrono::seconds> ttl;
    if (args.contains("ttl_s")) ttl = std::chrono::seconds(unsigned_of(args, "ttl_s", 0, 1u << 30));
    return exposures.ticket(id_of(args), port_of(args), ttl);
  });
}

}  // namespace zn::broker
