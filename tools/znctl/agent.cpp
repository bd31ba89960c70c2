// znctl exec, cp and agent: signed commands to a session's in-sandbox agent
// (issue 15). zerod seals every command; znctl only asks.
#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "broker/control/server.h"
#include "command.h"

namespace zn::znctl {

namespace {
namespace agent_cli {

std::string unb64(const std::string& text) {
  std::string out(text.size(), '\0');
  size_t len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(), text.size(),
                        nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    throw std::runtime_error("zerod sent output that is not base64");
  out.resize(len);
  return out;
}

std::string b64(const std::string& bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.pop_back();
  return out;
}

// znctl exec ID [--timeout S] [--cwd DIR] [--env K=V]... [--user UID[:GID]] -- CMD ARGS...
int exec(const Args& a) {
  const std::string id = arg(a, 0, "ID");
  json args = {{"id", id}};
  size_t i = 1;
  json env = json::object();
  for (; i < a.size() && a[i] != "--"; ++i) {
    if (i + 1 >= a.size()) throw UsageError("missing a value for " + a[i]);
    if (a[i] == "--timeout")
      args["timeout_ms"] = std::stoul(a[++i]) * 1000;
    else if (a[i] == "--cwd")
      args["cwd"] = a[++i];
    else if (a[i] == "--user") {
      // Numeric: the guest's names are not the host's.
      const std::string u = a[++i];
      const size_t colon = u.find(':');
      try {
        size_t used = 0;
        args["uid"] = std::stoul(u.substr(0, colon), &used);
        if (used != (colon == std::string::npos ? u.size() : colon)) throw std::invalid_argument(u);
        if (colon != std::string::npos) args["gid"] = std::stoul(u.substr(colon + 1));
      } catch (const std::exception&) {
        throw UsageError("--user UID[:GID] (numbers)");
      }
    } else if (a[i] == "--env") {
      const std::string kv = a[++i];
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError("--env K=V");
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    } else
      throw UsageError("unknown option " + a[i] + " (the command goes after --)");
  }
  if (i >= a.size() || i + 1 >= a.size()) throw UsageError("missing -- CMD [ARGS...]");
  args["argv"] = std::vector<std::string>(a.begin() + static_cast<long>(i) + 1, a.end());
  if (!env.empty()) args["env"] = env;
  if (!isatty(0)) {
    std::stringstream in;
    in << std::cin.rdbuf();
    args["stdin"] = in.str();
  }
  int code = 1;
  json lines = json::array();
  broker::control_stream(options.socket, "command.exec", args, [&](const json& line) {
    if (line.contains("ok")) return true;  // zerod's answer to the request itself
    if (options.json_out) lines.push_back(line);
    if (line.contains("stream")) {
      if (!options.json_out) {
        const std::string bytes = unb64(line.value("b64", ""));
        std::fwrite(bytes.data(), 1, bytes.size(), line["stream"] == "stderr" ? stderr : stdout);
        std::fflush(line["stream"] == "stderr" ? stderr : stdout);
      }
      return true;
    }
    if (line.contains("result")) {
      const json& r = line["result"];
      code = r.contains("exit_code") ? r["exit_code"].get<int>() : 128 + r.value("signal", 0);
      if (!options.json_out && r.value("timed_out", false)) std::cerr << "znctl: timed out\n";
    } else if (line.contains("reject")) {
      if (!options.json_out)
        std::cerr << "znctl: the agent refused it: " << line["reject"].value("reason", "?") << "\n";
      code = 125;
    } else if (line.contains("error")) {
      if (!options.json_out) std::cerr << "znctl: " << line["error"].get<std::string>() << "\n";
      code = 125;
    }
    return false;
  });
  if (options.json_out) std::cout << lines.dump(options.pretty ? 2 : -1) << std::endl;
  return code;
}

// znctl cp ID:PATH LOCAL | LOCAL ID:PATH [--mode OCTAL]
int cp(const Args& a) {
  const std::string from = arg(a, 0, "SOURCE"), to = arg(a, 1, "DESTINATION");
  auto remote = [](const std::string& s) { return s.find(':') != std::string::npos && s.front() != '/'; };
  if (remote(from) == remote(to))
    throw UsageError("one of SOURCE and DESTINATION is ID:PATH, the other local");
  if (remote(from)) {
    const size_t c = from.find(':');
    json r = call("command.get", {{"id", from.substr(0, c)}, {"path", from.substr(c + 1)}});
    if (r.contains("error")) throw std::runtime_error(r["error"].get<std::string>());
    const std::string bytes = unb64(r.value("data_b64", ""));
    std::ofstream out(to, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + to);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    print(r, [&] { std::cout << bytes.size() << " bytes to " << to << "\n"; });
    return 0;
  }
  std::ifstream in(from, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + from);
  std::stringstream data;
  data << in.rdbuf();
  const size_t c = to.find(':');
  json args = {{"id", to.substr(0, c)}, {"path", to.substr(c + 1)}, {"data_b64", b64(data.str())}};
  if (a.size() > 3 && a[2] == "--mode") args["mode"] = std::stoul(a[3], nullptr, 8);
  json r = call("command.put", args);
  if (r.contains("error")) throw std::runtime_error(r["error"].get<std::string>());
  print(r, [&] { std::cout << r.value("bytes", 0) << " bytes to " << to << "\n"; });
  return 0;
}

int agent_key(const Args&) {
  json r = call("command.key");
  print(r, [&] {
    std::cout << r["public_key"].get<std::string>() << " (agent port " << r["agent_port"] << ")\n";
  });
  return 0;
}

int agent_ping(const Args& a) {
  json r = call("command.ping", {{"id", arg(a, 0, "ID")}});
  print(r, [&] {
    std::cout << (r.value("ran", false) ? "pong" : "refused: " + r["result"].value("reason", "?")) << "\n";
  });
  return r.value("ran", false) ? 0 : 1;
}

// znctl agent provision ID [--out FILE]: the config a session's agent is
// started with (zn-agent --config FILE). It holds the session's result key:
// written 0600, never printed to a terminal by accident.
int agent_provision(const Args& a) {
  const std::string id = arg(a, 0, "ID");
  json r = call("command.provision", {{"id", id}});
  const std::string text = r.value("config", "");
  if (a.size() >= 3 && a[1] == "--out") {
    const std::string path = a[2];
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::close(fd) != 0)
      throw std::runtime_error("cannot write " + path);
    print(json{{"written", path}, {"agent_port", r["agent_port"]}},
          [&] { std::cout << "agent config for " << id << " written to " << path << " (0600)\n"; });
    return 0;
  }
  if (a.size() > 1) throw UsageError("agent provision ID [--out FILE]");
  if (isatty(1)) throw UsageError("the config holds a secret: use --out FILE or redirect stdout");
  std::cout << text;
  return 0;
}

int agent_rotate(const Args&) {
  json r = call("command.rotate");
  print(r, [&] {
    std::cout << "command key is now " << r["public_key"].get<std::string>() << "\n";
    std::cout << r["rekeyed"].size() << " agent(s) rekeyed";
    if (!r["unreached"].empty()) {
      std::cout << "; not reached (rekeyed at their next command):";
      for (const auto& u : r["unreached"])
        std::cout << "\n  " << u["session"].get<std::string>() << ": " << u["reason"].get<std::string>();
    }
    std::cout << "\n";
  });
  return 0;
}

constexpr Verb kExecVerbs[] = {
    {"run", "exec ID [--timeout S] [--cwd DIR] [--env K=V]... [--user UID[:GID]] -- CMD [ARGS...]", exec}};
constexpr Verb kCpVerbs[] = {{"copy", "cp ID:PATH LOCAL | LOCAL ID:PATH [--mode OCTAL]", cp}};
constexpr Verb kAgentVerbs[] = {{"key", "agent key", agent_key},
                                {"ping", "agent ping ID", agent_ping},
                                {"provision", "agent provision ID [--out FILE]", agent_provision},
                                {"rotate-key", "agent rotate-key", agent_rotate}};

}  // namespace agent_cli
}  // namespace

std::span<const Verb> exec_verbs() { return agent_cli::kExecVerbs; }
std::span<const Verb> cp_verbs() { return agent_cli::kCpVerbs; }
std::span<const Verb> agent_verbs() { return agent_cli::kAgentVerbs; }

}  // namespace zn::znctl
