#include "userspace/http_target.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace zn::http {
namespace {

struct Normalised {
  const char* in;
  const char* path;
  const char* query;  // nullptr: no '?'
};

class NormaliseTargetTest : public ::testing::TestWithParam<Normalised> {};

TEST_P(NormaliseTargetTest, Normalises) {
  const Normalised& c = GetParam();
  std::string why;
  const auto t = normalise_target(c.in, &why);
  ASSERT_TRUE(t.has_value()) << c.in << ": " << why;
  EXPECT_EQ(t->path, c.path) << c.in;
  EXPECT_EQ(t->has_query, c.query != nullptr) << c.in;
  EXPECT_EQ(t->query, c.query == nullptr ? "" : c.query) << c.in;
  // Idempotent: the forwarded target normalises to itself.
  const auto again = normalise_target(t->path);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->path, t->path);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, NormaliseTargetTest,
    ::testing::Values(Normalised{"/", "/", nullptr}, Normalised{"/repos/x", "/repos/x", nullptr},
                      Normalised{"/a/%2e%2e/b", "/b", nullptr},
                      Normalised{"/repos/../admin", "/admin", nullptr}, Normalised{"/..", "/", nullptr},
                      Normalised{"/../../x", "/x", nullptr}, Normalised{"/.", "/", nullptr},
                      Normalised{"/%7E", "/~", nullptr}, Normalised{"/%7euser", "/~user", nullptr},
                      Normalised{"/%41", "/A", nullptr}, Normalised{"/%61dmin", "/admin", nullptr},
                      Normalised{"/x/%2e%2E/", "/", nullptr}, Normalised{"/a/%2e%2E/b", "/b", nullptr},
                      Normalised{"/a/./b", "/a/b", nullptr}, Normalised{"/a/b/..", "/a/", nullptr},
                      Normalised{"/a/b/.", "/a/b/", nullptr}, Normalised{"/a/b/../", "/a/", nullptr},
                      Normalised{"/a//b", "/a//b", nullptr}, Normalised{"//a/../b", "//b", nullptr},
                      Normalised{"/a/.b/..c/...", "/a/.b/..c/...", nullptr},
                      Normalised{"/a%3fb", "/a%3Fb", nullptr}, Normalised{"/%c3%a9", "/%C3%A9", nullptr},
                      Normalised{"/a%20b", "/a%20b", nullptr}, Normalised{"/a%25", "/a%25", nullptr},
                      Normalised{"/?", "/", ""}, Normalised{"/p?q=%2F&r=%2f", "/p", "q=%2F&r=%2f"},
                      Normalised{"/a/../b?c=../d", "/b", "c=../d"}, Normalised{"/p?a?b", "/p", "a?b"},
                      Normalised{"/p?x=\\", "/p", "x=\\"}));

TEST(NormaliseTarget, Rejects) {
  for (const std::string& bad : std::initializer_list<std::string>{
           "",       "a/b",          "*",     "http://a/b", "?x",       "/%",
           "/%4",    "/%G1",         "/%1G",  "/a%2fb",     "/a%2Fb",   "/a%5cb",
           "/a%5Cb", "/a%00b",       "/a\\b", "/a b",       "/a\tb",    std::string("/a\0b", 4),
           "/a\x7f", "/caf\xc3\xa9", "/a#b",  "/a?b c",     "/a?b\x01", "/a?\xff",
           "/a?b#c",
       }) {
    std::string why;
    EXPECT_FALSE(normalise_target(bad, &why).has_value()) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_FALSE(normalise_target("/a%2fb").has_value());  // why is optional
}

}  // namespace
}  // namespace zn::http
