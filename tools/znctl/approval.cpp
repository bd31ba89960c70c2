// znctl approval: requests held for a human's answer (policy "ask").
#include <iostream>

#include "command.h"

namespace zn::znctl {

namespace {

int list(const Args&) {
  json r = call("approval.list");
  print(r, [&] {
    for (const auto& h : r)
      std::cout << h["ticket"] << "  " << h["session"].get<std::string>() << "  "
                << h["method"].get<std::string>() << " " << h["url"].get<std::string>() << "  expires "
                << h["expires"].get<std::string>() << "\n";
  });
  return 0;
}

// decision is "allow" or "deny", zerod's verb approval.<decision>.
int decide(const std::string& decision, const Args& a) {
  const std::string& text = arg(a, 0, "TICKET");
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("TICKET is a number (see approval list)");
  json r = call("approval." + decision, {{"ticket", std::stoull(text)}});
  print(r, [&] { std::cout << (decision == "allow" ? "approved " : "denied ") << r["ticket"] << "\n"; });
  return 0;
}

int allow(const Args& a) { return decide("allow", a); }
int deny(const Args& a) { return decide("deny", a); }

constexpr Verb kVerbs[] = {
    {"list", "approval list", list},
    {"allow", "approval allow TICKET", allow},
    {"deny", "approval deny TICKET", deny},
};

}  // namespace

std::span<const Verb> approval_verbs() { return kVerbs; }

}  // namespace zn::znctl
