// Capability handles: unforgeable (160 random bits each), kept for a running
// guest across policy updates, never reused once dropped.
#include "broker/session/cap_handles.h"

#include <gtest/gtest.h>

#include <set>

#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

TEST(CapHandles, OnePerCapabilityRandomAndKeptWhileDeclared) {
  const Policy two = parse_policy(R"({"policy":{},"caps":{"data":{"kind":"kv"},"my-sql":{"kind":"sql"}}})");
  const auto first = assign_cap_handles(two, {});
  ASSERT_EQ(first.size(), 2u);
  for (const auto& [name, h] : first) {
    EXPECT_EQ(h.rfind("cap:", 0), 0u) << h;
    EXPECT_EQ(h.size(), 4u + 32u);
    EXPECT_EQ(h.find_first_not_of("abcdefghijklmnopqrstuvwxyz234567", 4), std::string::npos) << h;
  }
  EXPECT_NE(first.at("data"), first.at("my-sql"));
  // An update keeps what is still declared and drops the rest.
  const Policy one = parse_policy(R"({"policy":{},"caps":{"data":{"kind":"kv","mode":"ro"}}})");
  const auto updated = assign_cap_handles(one, first);
  EXPECT_EQ(updated, (std::map<std::string, std::string>{{"data", first.at("data")}}));
  // Re-declared after being dropped: a new handle, never the old one.
  EXPECT_NE(assign_cap_handles(two, updated).at("my-sql"), first.at("my-sql"));
  // No two alike over many draws.
  std::set<std::string> seen;
  for (int i = 0; i < 2000; ++i) EXPECT_TRUE(seen.insert(new_cap_handle()).second);
  EXPECT_EQ(cap_env_name("my-sql"), "ZN_CAP_MY_SQL");
}

}  // namespace
}  // namespace zn::broker
