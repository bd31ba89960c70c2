// znctl key: the host key zerod seals resource values under at rest.
#include <iostream>

#include "command.h"

namespace zn::znctl {

namespace {
namespace key_cli {

int show(const Args&) {
  json r = call("key.show");
  print(r, [&] {
    std::cout << "host key " << r["id"].get<std::string>() << " (" << r["path"].get<std::string>() << ")\n";
  });
  return 0;
}

// A new key; every sealed value resealed under it, the old key gone.
int rotate(const Args&) {
  json r = call("key.rotate");
  print(r, [&] {
    std::cout << "host key rotated: " << r["from"].get<std::string>() << " -> " << r["to"].get<std::string>()
              << "\n";
  });
  return 0;
}

constexpr Verb kVerbs[] = {
    {"show", "key show", show},
    {"rotate", "key rotate", rotate},
};

}  // namespace key_cli
}  // namespace

std::span<const Verb> key_verbs() { return key_cli::kVerbs; }

}  // namespace zn::znctl
