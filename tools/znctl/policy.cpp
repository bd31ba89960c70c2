// znctl policy: check a policy file offline, or show a session's policy.
#include <iostream>

#include "broker/policy/compiled.h"
#include "broker/policy/parser.h"
#include "command.h"

namespace zn::znctl {

namespace {
namespace policy_cli {

// Compiles the file as zerod would, without zerod; a bad policy throws
// PolicyError, which main prints with its JSON path.
int check(const Args& a) {
  auto compiled = broker::CompiledPolicy::compile(broker::parse_policy(read_file(arg(a, 0, "FILE"))));
  const auto& p = compiled->policy();
  json r = {{"ok", true},
            {"allow", p.allow.size()},
            {"deny", p.deny.size()},
            {"l4", compiled->l4_targets().size()},
            {"resources", p.resources.size()}};
  print(r, [&] {
    std::cout << "ok: " << p.allow.size() << " allow, " << p.deny.size() << " deny, "
              << compiled->l4_targets().size() << " L4, " << p.resources.size() << " resource(s)\n";
  });
  return 0;
}

int show(const Args& a) {
  json r = call("session.show", {{"id", arg(a, 0, "ID")}})["policy"];
  print(r, [&] { std::cout << r.dump(2) << "\n"; });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"check", "policy check FILE", check},
    {"show", "policy show ID", show},
};

}  // namespace policy_cli
}  // namespace

std::span<const Verb> policy_verbs() { return policy_cli::kVerbs; }

}  // namespace zn::znctl
