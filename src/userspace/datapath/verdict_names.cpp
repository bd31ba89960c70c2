#include "userspace/datapath/verdict_names.h"

#include <array>

namespace zn::dp {
namespace {

#define ZN_VERDICT_NAME_(ident, name) name,
constexpr std::array<std::string_view, ZN_VERDICT_COUNT> kNames = {ZN_VERDICTS(ZN_VERDICT_NAME_)};
#undef ZN_VERDICT_NAME_
static_assert(ZN_VERDICT_COUNT < ZN_STATS_PER_SESSION, "counter slots must cover every verdict");

}  // namespace

std::string_view verdict_name(unsigned verdict) {
  if (verdict < kNames.size()) return kNames[verdict];
  if (verdict == ZN_STAT_EVENTS_SUPPRESSED) return "events:suppressed";
  return "unknown";
}

std::optional<unsigned> verdict_from_name(std::string_view name) {
  for (unsigned i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return i;
  return std::nullopt;
}

}  // namespace zn::dp
