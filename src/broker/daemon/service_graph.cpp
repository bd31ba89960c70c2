#include "broker/daemon/service_graph.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace zn::broker {

ServiceGraph::ServiceGraph(std::vector<ServiceDeclaration> declarations) {
  std::map<std::string, size_t> index;
  for (ServiceDeclaration& d : declarations) {
    if (!index.emplace(d.name, services_.size()).second)
      throw std::invalid_argument("service '" + d.name + "' declared twice");
    services_.push_back({std::move(d), {}, {}, false});
  }
  // Kahn's algorithm, always taking the first declared among the ready, so
  // the order is the declaration's wherever the needs allow.
  std::vector<size_t> unmet(services_.size(), 0);
  std::vector<std::vector<size_t>> needed_by(services_.size());
  for (size_t i = 0; i < services_.size(); ++i)
    for (const std::string& need : services_[i].declaration.needs) {
      auto it = index.find(need);
      if (it == index.end())
        throw std::invalid_argument("service '" + services_[i].declaration.name + "' needs '" + need +
                                    "', which is not declared");
      ++unmet[i];
      needed_by[it->second].push_back(i);
    }
  std::vector<bool> placed(services_.size(), false);
  while (order_.size() < services_.size()) {
    size_t next = services_.size();
    for (size_t i = 0; i < services_.size() && next == services_.size(); ++i)
      if (!placed[i] && unmet[i] == 0) next = i;
    if (next == services_.size()) {
      std::string left;
      for (size_t i = 0; i < services_.size(); ++i)
        if (!placed[i]) left += (left.empty() ? "" : ", ") + services_[i].declaration.name;
      throw std::invalid_argument("services need each other in a cycle: " + left);
    }
    placed[next] = true;
    order_.push_back(next);
    for (size_t dependent : needed_by[next]) --unmet[dependent];
  }
}

void ServiceGraph::bind(const std::string& name, std::function<void()> start, std::function<void()> stop) {
  auto it = std::find_if(services_.begin(), services_.end(),
                         [&](const Service& s) { return s.declaration.name == name; });
  if (it == services_.end()) throw std::invalid_argument("service '" + name + "' is not declared");
  if (it->bound) throw std::invalid_argument("service '" + name + "' bound twice");
  it->start = std::move(start);
  it->stop = std::move(stop);
  it->bound = true;
}

void ServiceGraph::start_all() {
  for (const Service& s : services_)
    if (!s.bound) throw std::logic_error("service '" + s.declaration.name + "' is declared but not bound");
  for (const size_t i : order_) {
    try {
      if (services_[i].start) services_[i].start();
    } catch (...) {
      stop_all();
      throw;
    }
    started_.push_back(i);
  }
}

void ServiceGraph::stop_all(
    const std::function<void(const std::string& service, const std::string& what)>& on_stop_error) {
  while (!started_.empty()) {
    Service& s = services_[started_.back()];
    started_.pop_back();
    if (!s.stop) continue;
    try {
      s.stop();
    } catch (const std::exception& e) {
      if (on_stop_error) on_stop_error(s.declaration.name, e.what());
    }
  }
}

std::vector<std::string> ServiceGraph::order() const {
  std::vector<std::string> names;
  for (const size_t i : order_) names.push_back(services_[i].declaration.name);
  return names;
}

std::string ServiceGraph::describe() const {
  std::string out;
  for (const size_t i : order_) {
    const Service& s = services_[i];
    std::string needs;
    for (const std::string& n : s.declaration.needs) needs += (needs.empty() ? "" : ", ") + n;
    out += s.declaration.name + ": " + (needs.empty() ? "-" : needs) + "  -- " + s.declaration.what + "\n";
  }
  return out;
}

}  // namespace zn::broker
