// znctl: inspect and control zerod, the way bpftool does the kernel.
//   znctl [-j|--json] [-p|--pretty] [--socket PATH] [--state-dir DIR] [--pin-root DIR] OBJECT VERB [ARGS]
// Every verb answers `help`; with -j every result and every error is JSON.
// Each object's verbs live in <object>.cpp (command.h); this file parses the
// options, finds the verb, prints help and turns exceptions into exit codes.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "broker/policy/parser.h"
#include "command.h"

namespace {

using zn::znctl::Verb;
using json = zn::znctl::json;

// Object -> verb name -> verb. Sorted, so help lists objects and verbs
// alphabetically whatever order the tables are written in.
using VerbIndex = std::map<std::string, std::map<std::string, const Verb*>>;

VerbIndex index_verbs() {
  namespace z = zn::znctl;
  const std::pair<const char*, std::span<const Verb>> objects[] = {
      {"approval", z::approval_verbs()}, {"audit", z::audit_verbs()},
      {"events", z::events_verbs()},     {"identity", z::identity_verbs()},
      {"key", z::key_verbs()},           {"map", z::map_verbs()},
      {"policy", z::policy_verbs()},     {"prog", z::prog_verbs()},
      {"session", z::session_verbs()},   {"vm", z::vm_verbs()},
      {"stats", z::stats_verbs()},       {"status", z::status_verbs()},
      {"exec", z::exec_verbs()},         {"cp", z::cp_verbs()},
      {"agent", z::agent_verbs()},
  };
  VerbIndex index;
  for (const auto& [object, verbs] : objects)
    for (const Verb& verb : verbs) index[object][verb.name] = &verb;
  return index;
}

void usage(std::ostream& out, const VerbIndex& index, const std::string& only = "") {
  out << "usage: znctl [-j|--json] [-p|--pretty] [--socket PATH] [--state-dir DIR] [--pin-root DIR] "
         "OBJECT VERB\n";
  for (const auto& [object, verbs] : index) {
    if (!only.empty() && object != only) continue;
    for (const auto& [name, verb] : verbs) out << "  znctl " << verb->usage << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  using zn::znctl::options;
  using zn::znctl::UsageError;
  std::vector<std::string> args(argv + 1, argv + argc);
  const VerbIndex index = index_verbs();
  try {
    while (!args.empty() && args[0].rfind('-', 0) == 0) {
      const std::string o = args[0];
      args.erase(args.begin());
      if (o == "-j" || o == "--json")
        options.json_out = true;
      else if (o == "-p" || o == "--pretty")
        options.json_out = options.pretty = true;
      else if ((o == "--socket" || o == "--state-dir" || o == "--pin-root") && !args.empty()) {
        std::string& value = o == "--socket"      ? options.socket
                             : o == "--state-dir" ? options.state_dir
                                                  : options.pin_root;
        value = args[0];
        args.erase(args.begin());
      } else if (o == "-h" || o == "--help") {
        usage(std::cout, index);
        return 0;
      } else
        throw UsageError("unknown option '" + o + "'");
    }
    if (args.empty() || args[0] == "help") {
      usage(std::cout, index);
      return args.empty() ? 2 : 0;
    }
    auto object = index.find(args[0]);
    if (object == index.end()) throw UsageError("unknown object '" + args[0] + "'");
    // An object with one verb ("znctl stats", "znctl events") may leave it out.
    std::string verb = args.size() > 1 ? args[1] : "";
    size_t rest = 2;
    if (!object->second.count(verb) && object->second.size() == 1 && verb != "help") {
      verb = object->second.begin()->first;
      rest = 1;
    }
    if (verb.empty() || verb == "help" || (args.size() > rest && args[rest] == "help")) {
      usage(std::cout, index, args[0]);
      return 0;
    }
    auto entry = object->second.find(verb);
    if (entry == object->second.end()) throw UsageError("unknown verb '" + args[0] + " " + verb + "'");
    return entry->second->run(std::vector<std::string>(args.begin() + static_cast<long>(rest), args.end()));
  } catch (const UsageError& e) {
    if (options.json_out)
      std::cout << json{{"error", e.what()}}.dump() << std::endl;
    else {
      std::cerr << "znctl: " << e.what() << "\n";
      usage(std::cerr, index);
    }
    return 2;
  } catch (const zn::broker::PolicyError& e) {
    if (options.json_out)
      std::cout << json{{"error", e.what()}, {"path", e.path()}}.dump() << std::endl;
    else
      std::cerr << "znctl: policy error at " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    if (options.json_out)
      std::cout << json{{"error", e.what()}}.dump() << std::endl;
    else
      std::cerr << "znctl: " << e.what() << "\n";
    return 1;
  }
}
