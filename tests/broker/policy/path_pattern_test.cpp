#include "broker/policy/path_pattern.h"

#include <gtest/gtest.h>

#include <chrono>

namespace zn::broker {
namespace {

PathPattern pat(const char* text) {
  std::string why;
  auto p = PathPattern::parse(text, &why);
  EXPECT_TRUE(p) << text << ": " << why;
  return *p;
}

TEST(PathPattern, SingleStarIsOneNonEmptySegment) {
  auto p = pat("/repos/*/issues");
  EXPECT_TRUE(p.matches("/repos/zeroness/issues"));
  EXPECT_FALSE(p.matches("/repos/a/b/issues"));
  EXPECT_FALSE(p.matches("/repos//issues"));
  EXPECT_FALSE(p.matches("/repos/zeroness/issues/1"));
}

TEST(PathPattern, DoubleStarIsAnyNumberOfSegments) {
  auto p = pat("/repos/**");
  EXPECT_TRUE(p.matches("/repos/"));
  EXPECT_TRUE(p.matches("/repos/a"));
  EXPECT_TRUE(p.matches("/repos/a/b/c"));
  EXPECT_FALSE(p.matches("/repository"));
  EXPECT_FALSE(p.matches("/other/repos/a"));
  auto mid = pat("/a/**/z");
  EXPECT_TRUE(mid.matches("/a/z"));
  EXPECT_TRUE(mid.matches("/a/b/c/z"));
  EXPECT_FALSE(mid.matches("/a/b/c/y"));
}

TEST(PathPattern, LiteralPathsMatchExactly) {
  auto p = pat("/v1/charges");
  EXPECT_TRUE(p.matches("/v1/charges"));
  EXPECT_FALSE(p.matches("/v1/charges/"));
  EXPECT_FALSE(p.matches("/v1/Charges"));
  EXPECT_FALSE(p.matches("v1/charges"));
}

// Rules only allow, so case-sensitive matching is the safe side of a
// case-folding backend (IIS): "/V1/x" is not inside "/v1/**" and is refused,
// it never reaches a route the rule did not name.
TEST(PathPattern, CaseIsSignificant) {
  auto p = pat("/v1/**");
  EXPECT_TRUE(p.matches("/v1/x"));  // positive control
  EXPECT_FALSE(p.matches("/V1/x"));
  EXPECT_FALSE(p.matches("/v1/x") && p.matches("/V1/X"));
  auto star = pat("/repos/*/issues");
  EXPECT_FALSE(star.matches("/repos/a/ISSUES"));
  EXPECT_FALSE(star.matches("/REPOS/a/issues"));
}

TEST(PathPattern, RejectsWhatCouldNotMatchANormalisedPath) {
  for (const char* bad :
       {"", "repos", "/a/../b", "/a/./b", "/a%2fb", "/a\\b", "/a?x=1", "/a#f", "/re*pos", "/***",
        "/v1/..;/admin", "/a;b", "/a//b", "//a", "/admin.", "/a/b./c", "/a b", "/caf\xc3\xa9"}) {
    std::string why;
    EXPECT_FALSE(PathPattern::parse(bad, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  std::string many = "";
  for (int i = 0; i < 65; ++i) many += "/a";
  EXPECT_FALSE(PathPattern::parse(many, nullptr));
}

// A guest picks the path: many "**" against a long path must stay linear.
TEST(PathPattern, GlobstarsCannotBlowUp) {
  auto p = pat("/**/a/**/a/**/a/**/a/**/b");
  std::string path;
  for (int i = 0; i < 4000; ++i) path += "/a";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.matches(path));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace zn::broker
