#include "userspace/datapath/verdict_names.h"

#include <array>

namespace zn::dp {
namespace {

#define ZN_VERDICT_NAME_(ident, number, name) name,
constexpr std::array<std::string_view, ZN_VERDICT_COUNT> kNames = {ZN_VERDICTS(ZN_VERDICT_NAME_)};
#undef ZN_VERDICT_NAME_

// The explicit numbers are 0..COUNT-1 in list order, so kNames (built by
// position) and every table indexed by verdict agree with the programs.
#define ZN_VERDICT_NUMBER_(ident, number, name) number,
constexpr unsigned kNumbers[] = {ZN_VERDICTS(ZN_VERDICT_NUMBER_)};
#undef ZN_VERDICT_NUMBER_
constexpr bool numbers_dense_in_order() {
  unsigned expected = 0;
  for (unsigned n : kNumbers)
    if (n != expected++) return false;
  return expected == ZN_VERDICT_COUNT;
}
static_assert(numbers_dense_in_order(), "verdict numbers must be 0..ZN_VERDICT_COUNT-1 in list order");
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
