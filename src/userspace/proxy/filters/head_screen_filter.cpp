#include "userspace/proxy/filters/head_screen_filter.h"

#include <algorithm>

namespace zn::proxy::filters {

FilterResult HeadScreenFilter::on_head(Request& request, Connection& connection) const {
  const std::vector<Substitution>& exempt = request.decision.substitutions;
  std::vector<std::string> labels, where;
  auto note = [&](std::vector<std::string> found, const char* part) {
    if (found.empty()) return;
    where.push_back(part);
    for (std::string& l : found)
      if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(std::move(l));
  };
  if (connection.screen.armed()) {
    const std::string_view target = request.head.target;
    const size_t q = target.find('?');
    note(connection.screen.check(target.substr(0, q), exempt), "path");
    if (q != std::string_view::npos) note(connection.screen.check(target.substr(q + 1), exempt), "query");
    const std::string_view raw = request.raw_head();
    const size_t line_end = raw.find('\n');
    if (line_end != std::string_view::npos)
      note(connection.screen.check(raw.substr(line_end + 1), exempt), "header");
  }
  if (labels.empty() && !connection.screen_blind) return FilterResult::go();
  connection.counters.denied++;
  FilterResult refused = FilterResult::refused(
      403, connection.screen_blind ? "zeroness: blocked by policy (tripwires cannot be screened)\n"
                                   : std::string(kTripwireRefusalBody));
  if (labels.empty()) return refused;
  refused.alarm = tripwire_alarm(request, connection, std::move(labels), std::move(where));
  return refused;
}

}  // namespace zn::proxy::filters
