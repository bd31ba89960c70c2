#include "broker/control/command_verbs.h"

#include <sodium.h>

namespace zn::broker {
namespace {

using json = nlohmann::json;
using command::CommandType;
using command::FrameKind;

std::string text(const json& args, const char* key) {
  if (!args.contains(key) || !args[key].is_string())
    throw CommandError(std::string("missing \"") + key + "\" (string)");
  return args[key].get<std::string>();
}

// Output is bytes, and JSON text must be UTF-8: it travels as base64.
std::string b64(std::string_view bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.pop_back();
  return out;
}

std::string unb64(const std::string& text) {
  std::string out(text.size(), '\0');
  size_t len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(),
                        nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    throw CommandError("\"data_b64\" is not base64");
  out.resize(len);
  return out;
}

json exec_body(const json& args) {
  if (!args.contains("argv") || !args["argv"].is_array() || args["argv"].empty())
    throw CommandError("\"argv\" must be a non-empty array of strings");
  json body = {{"argv", args["argv"]}};
  for (const char* k : {"env", "cwd", "timeout_ms", "stdin", "uid", "gid"})
    if (args.contains(k)) body[k] = args[k];
  return body;
}

}  // namespace

void register_command_verbs(ControlServer& server, CommandClient& commands,
                            std::function<nlohmann::json()> rotate) {
  server.handle("command.provision", [&commands](const json& args) {
    return json{{"config", commands.agent_config(text(args, "id"))}, {"agent_port", commands.agent_port()}};
  });
  server.handle("command.rotate", [rotate = std::move(rotate)](const json&) { return rotate(); });
  server.handle("command.key", [&commands](const json&) {
    return json{{"public_key", commands.public_key_hex()}, {"agent_port", commands.agent_port()}};
  });
  server.stream("command.exec", [&commands](const json& args, const std::function<bool(const json&)>& emit,
                                            const std::atomic<bool>& stopping) {
    try {
      const json body = exec_body(args);
      const CommandOutcome o =
          commands.run(text(args, "id"), CommandType::kExec, body.dump(), {{"argv", body["argv"]}},
                       [&](const command::Frame& f) {
                         if (stopping) return false;
                         return emit({{"stream", f.kind == FrameKind::kStderr ? "stderr" : "stdout"},
                                      {"b64", b64(f.payload)}});
                       });
      emit(o.ran ? json{{"result", o.result}} : json{{"reject", o.result}});
    } catch (const std::exception& e) {
      emit({{"error", e.what()}});
    }
  });
  server.handle("command.put", [&commands](const json& args) {
    const std::string path = text(args, "path");
    json meta = {{"path", path}};
    if (args.contains("mode")) meta["mode"] = args["mode"];
    const CommandOutcome o =
        commands.run(text(args, "id"), CommandType::kPut, meta.dump() + "\n" + unb64(text(args, "data_b64")),
                     {{"path", path}}, [](const command::Frame&) { return true; });
    if (!o.ran) throw CommandError("refused by the agent: " + o.result.value("reason", "unknown"));
    return o.result;
  });
  server.handle("command.get", [&commands](const json& args) {
    const std::string path = text(args, "path");
    json body = {{"path", path}};
    if (args.contains("max_bytes")) body["max_bytes"] = args["max_bytes"];
    std::string data;
    const CommandOutcome o = commands.run(text(args, "id"), CommandType::kGet, body.dump(), {{"path", path}},
                                          [&](const command::Frame& f) {
                                            data += f.payload;
                                            return true;
                                          });
    if (!o.ran) throw CommandError("refused by the agent: " + o.result.value("reason", "unknown"));
    json out = o.result;
    out["data_b64"] = b64(data);
    return out;
  });
  server.handle("command.ping", [&commands](const json& args) {
    const CommandOutcome o = commands.run(text(args, "id"), CommandType::kPing, "", json::object(),
                                          [](const command::Frame&) { return true; });
    return json{{"ran", o.ran}, {"result", o.result}};
  });
}

}  // namespace zn::broker
