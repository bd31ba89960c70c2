// zerod's parts as services with declared lifetimes (issue 32): each has a
// name, the services it needs, a start and a stop. Services start in an
// order where each comes after everything it needs (ties in the order they
// were declared) and stop in the reverse of the order they started, so no
// part is ever used before it is made or after it is gone, whatever order
// the code happens to be written in. A start that throws stops what had
// started, in reverse, and the error goes on.
//
// The declaration (names and needs) is data apart from the code binding
// each start and stop, so it can be checked without starting anything: the
// graph in docs/HACKING.md is this declaration (a unit test compares them).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace zn::broker {

struct ServiceDeclaration {
  std::string name;
  std::vector<std::string> needs;
  std::string what;  // one line: what it is, for the graph's reader
};

class ServiceGraph {
 public:
  // Throws std::invalid_argument: a name declared twice, a need never
  // declared, a cycle.
  explicit ServiceGraph(std::vector<ServiceDeclaration> declarations);

  // Binds a declared service's start and stop (either may be empty).
  // Throws std::invalid_argument: not declared, or bound twice.
  void bind(const std::string& name, std::function<void()> start, std::function<void()> stop = {});

  // Starts every service in order. Throws std::logic_error if one is not
  // bound; rethrows a start's error after stopping what had started.
  void start_all();
  // Stops the started services, in reverse; idempotent. A stop that throws
  // is reported through `on_stop_error` and the others still stop.
  void stop_all(
      const std::function<void(const std::string& service, const std::string& what)>& on_stop_error = {});

  // The start order, by name.
  std::vector<std::string> order() const;
  // The graph as text: one line per service in start order,
  // "name: needs a, b  -- what". For docs/HACKING.md.
  std::string describe() const;

 private:
  struct Service {
    ServiceDeclaration declaration;
    std::function<void()> start, stop;
    bool bound = false;
  };
  std::vector<Service> services_;  // declaration order
  std::vector<size_t> order_;      // indices into services_, in start order
  std::vector<size_t> started_;    // indices into services_, those started
};

}  // namespace zn::broker
