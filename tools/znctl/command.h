// What every znctl object file shares: the global options, the verb table
// type, and the helpers a verb uses to call zerod, read its arguments and
// print. Each object (<object>.cpp) exports its verbs as a table, the way
// bpftool's prog.c and map.c each keep a cmds[]; main.cpp dispatches.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace zn::znctl {

using json = nlohmann::json;

struct Options {
  bool json_out = false, pretty = false;
  std::string socket = "/run/zeroness/zerod.sock";
  std::string state_dir = "/var/lib/zeroness";
  std::string pin_root = "/sys/fs/bpf/zeroness";
};

// Set once by main from the command line, before any verb runs.
extern Options options;

// A mistake in the command line: main prints it with the usage and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The arguments after OBJECT VERB.
using Args = std::vector<std::string>;

// A handler returns the exit code, so a verb can report a finding that is not
// an error (audit verify: 3 for a broken chain). Errors are thrown.
using Handler = int (*)(const Args&);

struct Verb {
  const char* name;   // as typed after the object: "list"
  const char* usage;  // one help line without "znctl ": "session show ID"
  Handler run;
};

// Each object's verbs, defined in the file of that name. Tables hold plain
// function pointers so they are constant data, built before main runs.
std::span<const Verb> agent_verbs();     // agent.cpp
std::span<const Verb> exec_verbs();      // agent.cpp
std::span<const Verb> cp_verbs();        // agent.cpp
std::span<const Verb> approval_verbs();  // approval.cpp
std::span<const Verb> audit_verbs();     // audit.cpp
std::span<const Verb> identity_verbs();  // identity.cpp
std::span<const Verb> key_verbs();       // key.cpp
std::span<const Verb> map_verbs();       // map.cpp
std::span<const Verb> policy_verbs();    // policy.cpp
std::span<const Verb> prog_verbs();      // prog.cpp
std::span<const Verb> session_verbs();   // session.cpp
std::span<const Verb> vm_verbs();        // vm.cpp
std::span<const Verb> events_verbs();    // daemon.cpp
std::span<const Verb> stats_verbs();     // daemon.cpp
std::span<const Verb> status_verbs();    // daemon.cpp

// With -j (or -p) prints value as JSON; otherwise runs plain, which prints
// the human form.
void print(const json& value, const std::function<void()>& plain);

// Calls zerod; a refusal becomes an exception carrying zerod's message.
json call(const std::string& verb, const json& args = json::object());

// "--name value" options after the positional arguments.
std::map<std::string, std::string> flags(const Args& args, size_t from,
                                         std::initializer_list<const char*> allowed);

// The positional argument at i; what names it in the error when it is missing.
const std::string& arg(const Args& args, size_t i, const char* what);

// A whole file (a policy); std::runtime_error if it cannot be read.
std::string read_file(const std::string& path);

}  // namespace zn::znctl
