#include "command.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "broker/control/server.h"
#include "broker/policy/parser.h"

namespace zn::znctl {

Options options;

void print(const json& value, const std::function<void()>& plain) {
  if (options.json_out)
    std::cout << value.dump(options.pretty ? 2 : -1) << std::endl;
  else
    plain();
}

json call(const std::string& verb, const json& args) {
  json reply = broker::control_call(options.socket, verb, args);
  if (!reply.value("ok", false)) {
    const json& e = reply["error"];
    std::string msg = e.value("message", "error");
    // A policy error keeps where in the document it is (for -j, and for
    // "policy error at" in text), as a local one does.
    if (const std::string path = e.value("path", ""); !path.empty()) {
      if (msg.rfind(path + ": ", 0) == 0) msg.erase(0, path.size() + 2);
      throw broker::PolicyError(path, msg);
    }
    throw std::runtime_error(msg);
  }
  return reply["result"];
}

std::map<std::string, std::string> flags(const Args& args, size_t from,
                                         std::initializer_list<const char*> allowed) {
  std::map<std::string, std::string> out;
  for (size_t i = from; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= args.size()) throw UsageError("unexpected argument '" + a + "'");
    const std::string name = a.substr(2);
    if (std::find_if(allowed.begin(), allowed.end(), [&](const char* k) { return name == k; }) ==
        allowed.end())
      throw UsageError("unknown option '" + a + "'");
    out[name] = args[++i];
  }
  return out;
}

const std::string& arg(const Args& args, size_t i, const char* what) {
  if (i >= args.size()) throw UsageError(std::string("missing ") + what);
  return args[i];
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace zn::znctl
