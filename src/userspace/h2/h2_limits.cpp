#include "userspace/h2/h2_limits.h"

namespace zn::h2 {

uint64_t& H2Counters::at(Limit limit) {
  switch (limit) {
#define ZN_H2_CASE_(field, name, help) \
  case Limit::field:                   \
    return field;
    ZN_H2_LIMITS(ZN_H2_CASE_)
#undef ZN_H2_CASE_
  }
  return concurrent_streams;  // unreachable: every enumerator has a case
}

uint64_t H2Counters::at(Limit limit) const { return const_cast<H2Counters*>(this)->at(limit); }

std::string_view limit_name(Limit limit) {
  switch (limit) {
#define ZN_H2_CASE_(field, name, help) \
  case Limit::field:                   \
    return name;
    ZN_H2_LIMITS(ZN_H2_CASE_)
#undef ZN_H2_CASE_
  }
  return "?";
}

std::string_view limit_help(Limit limit) {
  switch (limit) {
#define ZN_H2_CASE_(field, name, help) \
  case Limit::field:                   \
    return help;
    ZN_H2_LIMITS(ZN_H2_CASE_)
#undef ZN_H2_CASE_
  }
  return "?";
}

}  // namespace zn::h2
