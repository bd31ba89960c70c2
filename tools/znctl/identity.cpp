// znctl identity: the public keys that minted identities ("identity": "jwt")
// are signed with, as a JWKS for the upstreams that verify them.
#include <iostream>

#include "command.h"

namespace zn::znctl {

namespace {
namespace identity_cli {

int jwks(const Args&) {
  json r = call("identity.jwks");
  print(r, [&] { std::cout << r.dump(2) << "\n"; });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"jwks", "identity jwks", jwks},
};

}  // namespace identity_cli
}  // namespace

std::span<const Verb> identity_verbs() { return identity_cli::kVerbs; }

}  // namespace zn::znctl
