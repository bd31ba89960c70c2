#include "userspace/http/target.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <random>
#include <string>

#include "broker/policy/path_pattern.h"
#include "userspace/http/message.h"

namespace zn::http {
namespace {

struct Normalised {
  const char* in;
  const char* path;
  const char* query;  // nullptr: no '?'
};

void PrintTo(const Normalised& c, std::ostream* os) { *os << c.in; }

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
                      Normalised{"/a//b", "/a/b", nullptr}, Normalised{"//a/../b", "/b", nullptr},
                      Normalised{"/a/.b/..c", "/a/.b/..c", nullptr}, Normalised{"/a%3fb", "/a%3Fb", nullptr},
                      Normalised{"/%c3%a9", "/%C3%A9", nullptr}, Normalised{"/a%20b", "/a%20b", nullptr},
                      Normalised{"/a%25", "/a%25", nullptr}, Normalised{"/?", "/", ""},
                      Normalised{"/p?q=%2F&r=%2f", "/p", "q=%2F&r=%2f"},
                      Normalised{"/a/../b?c=../d", "/b", "c=../d"}, Normalised{"/p?a?b", "/p", "a?b"},
                      Normalised{"/p?x=\\", "/p", "x=\\"},
                      // ';' and double escapes in the query are the application's business.
                      Normalised{"/v1/charges?x=1;y=2", "/v1/charges", "x=1;y=2"},
                      Normalised{"/v1/x?a=..;/admin&b=%252e", "/v1/x", "a=..;/admin&b=%252e"}));

// Issue 9, class 4: for every interpretation on which backends disagree, a
// raw target and what we make of it: the forwarded path, or "400" for a
// refusal as ambiguous. Hostile variants first, by interpretation, then the
// legitimate targets that must keep working.
struct Corpus {
  const char* in;
  const char* want;  // normalised path, or "400"
};

constexpr Corpus kCorpus[] = {
    // ';' path parameters: Tomcat/Jetty/Spring read "..;" as "..".
    {"/v1/..;/admin", "400"},
    {"/v1/..;jsessionid=x/admin", "400"},
    {"/v1/.;/admin", "400"},
    {"/v1/%2e%2e;/admin", "400"},
    {"/v1/%2E%2E;x=1/admin", "400"},
    {"/v1/.%2e;/admin", "400"},
    {"/v1;/../admin", "400"},
    {"/v1/x;/../../admin", "400"},
    {"/;/admin", "400"},
    {"/v1/charges;jsessionid=abc", "400"},
    {"/v1/x;", "400"},
    // ... and encoded (Jetty: ambiguous path parameter).
    {"/v1/..%3B/admin", "400"},
    {"/v1/..%3b/admin", "400"},
    {"/v1/x/..%3Bfoo/admin", "400"},
    {"/v1/%2e%2e%3b/admin", "400"},
    {"/v1/x%3B", "400"},
    // Backslash, raw and encoded: a separator to IIS, Windows, WHATWG.
    {"/v1/..\\admin", "400"},
    {"/v1\\..\\admin", "400"},
    {"/v1/..%5Cadmin", "400"},
    {"/v1/..%5cadmin", "400"},
    {"/v1/%5C../admin", "400"},
    // Encoded slash.
    {"/v1/..%2Fadmin", "400"},
    {"/v1/%2e%2e%2fadmin", "400"},
    // %u escapes (IIS).
    {"/v1/%u002e%u002e/admin", "400"},
    {"/v1/%U002E%U002E/admin", "400"},
    {"/v1/..%u2215admin", "400"},
    {"/v1/%uff0e%uff0e/admin", "400"},
    {"/v1/..%u005cadmin", "400"},
    // Double encoding, including double escapes built from decoded ones.
    {"/v1/%252e%252e%252fadmin", "400"},
    {"/v1/%252E%252E/admin", "400"},
    {"/v1/..%252fadmin", "400"},
    {"/v1/..%255cadmin", "400"},
    {"/v1/%25%32%65%25%32%65/admin", "400"},
    {"/v1/%25%32%45", "400"},
    {"/v1/%25%35%63", "400"},
    {"/v1/%25252e", "400"},
    {"/v1/%25u002e", "400"},
    {"/v1/%25U002E", "400"},
    {"/v1/%%32%65%%32%65/admin", "400"},
    {"/v1/%253B", "400"},
    // Overlong and otherwise invalid UTF-8 in escapes.
    {"/v1/%C0%AE%C0%AE/admin", "400"},
    {"/v1/%c0%ae%c0%ae%c0%afadmin", "400"},
    {"/v1/..%C0%AFadmin", "400"},
    {"/v1/..%C1%9Cadmin", "400"},
    {"/v1/%E0%80%AE%E0%80%AE/admin", "400"},
    {"/v1/..%E0%80%AFadmin", "400"},
    {"/v1/%F0%80%80%AE", "400"},
    {"/v1/%F0%80%80%AF", "400"},
    {"/v1/%C0%80", "400"},
    {"/v1/%80", "400"},
    {"/v1/%BF", "400"},
    {"/v1/%AE%AE/admin", "400"},
    {"/v1/%C3", "400"},
    {"/v1/%C3a", "400"},
    {"/v1/%C3/x", "400"},
    {"/v1/%C3%A9%A9", "400"},
    {"/v1/%E2%82", "400"},
    {"/v1/%E2%82/x", "400"},
    {"/v1/%ED%A0%80", "400"},
    {"/v1/%ED%BF%BF", "400"},
    {"/v1/%ED%A0%BD%ED%B8%80", "400"},  // CESU-8 surrogate pair
    {"/v1/%F4%90%80%80", "400"},
    {"/v1/%F5%80%80%80", "400"},
    {"/v1/%F8%88%80%80%80", "400"},
    {"/v1/%FE", "400"},
    {"/v1/%FF", "400"},
    // Unicode forms that NFKC or a Windows best-fit code page map onto path structure.
    {"/v1/%EF%BC%8E%EF%BC%8E%EF%BC%8Fadmin", "400"},  // fullwidth ". . /"
    {"/v1/%EF%BC%8E%EF%BC%8E/admin", "400"},
    {"/v1/..%EF%BC%8Fadmin", "400"},
    {"/v1/..%E2%88%95admin", "400"},          // U+2215 division slash
    {"/v1/..%E2%81%84admin", "400"},          // U+2044 fraction slash
    {"/v1/..%EF%BC%BCadmin", "400"},          // U+FF3C fullwidth reverse solidus
    {"/v1/..%EF%B9%A8admin", "400"},          // U+FE68 small reverse solidus
    {"/v1/..%E2%88%96admin", "400"},          // U+2216 set minus
    {"/v1/..%C2%A5admin", "400"},             // U+00A5 yen: '\' in cp932
    {"/v1/..%E2%82%A9admin", "400"},          // U+20A9 won: '\' in cp949
    {"/v1/%EF%B9%92%EF%B9%92/admin", "400"},  // U+FE52 small full stop
    {"/v1/%E2%80%A4%E2%80%A4/admin", "400"},  // U+2024 one dot leader
    {"/v1/%E2%80%A5/admin", "400"},           // U+2025 two dot leader: ".."
    {"/v1/%EF%B8%B0/admin", "400"},           // U+FE30 vertical two dot leader
    {"/v1/x%E2%80%A6", "400"},                // U+2026 ellipsis
    {"/v1/%E3%80%82%E3%80%82/admin", "400"},  // U+3002 ideographic full stop
    {"/v1/%EF%BD%A1%EF%BD%A1/admin", "400"},  // U+FF61 halfwidth ideographic full stop
    {"/v1/x%EF%BC%9Ba", "400"},               // U+FF1B fullwidth semicolon
    {"/v1/x%EF%B9%94a", "400"},               // U+FE54 small semicolon
    {"/v1/x%CD%BEa", "400"},                  // U+037E Greek question mark: ';' even under NFC
    {"/v1/x%EF%BC%9Fa", "400"},               // U+FF1F fullwidth '?'
    {"/v1/x%EF%BC%83a", "400"},               // U+FF03 fullwidth '#'
    {"/v1/%EF%BC%85%EF%BC%92e", "400"},       // U+FF05 fullwidth '%'
    {"/v1/%EF%B9%AA2e", "400"},               // U+FE6A small percent
    {"/v1/%E2%84%80", "400"},                 // U+2100 account of: "a/c"
    {"/v1/%E2%84%85", "400"},                 // U+2105 care of: "c/o"
    {"/v1/x%E2%92%88", "400"},                // U+2488 "1."
    {"/v1/..%C2%A0/admin", "400"},            // NBSP: ".. " then trimmed
    {"/v1/..%E3%80%80/admin", "400"},         // ideographic space
    {"/v1/..%E2%80%82/admin", "400"},         // en space
    // Encoded controls: C0, DEL, C1, line separators.
    {"/v1/%0A", "400"},
    {"/v1/..%0D%0A/admin", "400"},
    {"/v1/..%09/admin", "400"},
    {"/v1/x%0d%0aSet-Cookie:a=b", "400"},
    {"/v1/%1F", "400"},
    {"/v1/%01", "400"},
    {"/v1/%00", "400"},
    {"/v1/%7F", "400"},
    {"/v1/%7f", "400"},
    {"/v1/%C2%80", "400"},
    {"/v1/%C2%85", "400"},  // NEL
    {"/v1/%C2%9F", "400"},
    {"/v1/%E2%80%A8", "400"},
    {"/v1/%E2%80%A9", "400"},
    {"/v1/..\t/admin", "400"},
    {"/v1/..\n/admin", "400"},
    // Trailing dots and spaces (Windows strips them), and segments that are only dots and blanks.
    {"/admin.", "400"},
    {"/admin%20", "400"},
    {"/admin...", "400"},
    {"/admin%2e", "400"},
    {"/admin%2E%20", "400"},
    {"/admin.%20.%20", "400"},
    {"/v1/..%20/admin", "400"},
    {"/v1/.%20./admin", "400"},
    {"/v1/%20./../admin", "400"},
    {"/v1/x./y", "400"},
    {"/v1/x./../y", "400"},
    {"/v1/.../admin", "400"},
    {"/v1/..../admin", "400"},
    {"/v1/..+/admin", "400"},
    {"/v1/+../admin", "400"},
    {"/v1/.+/admin", "400"},
    {"/v1/..%2B/admin", "400"},
    {"/v1/..%2b%20/admin", "400"},
    // Merged slashes: collapsed before dot segments, as nginx merges them.
    {"/public//..//admin", "/admin"},
    {"/public//../admin", "/admin"},
    {"/v1//../../admin", "/admin"},
    {"/v1/x//..", "/v1/"},
    {"//admin", "/admin"},
    {"//evil.example/x", "/evil.example/x"},
    {"/v1///x", "/v1/x"},
    {"/v1/x//", "/v1/x/"},
    {"/v1/.//./x", "/v1/x"},
    // Dot segments in their decoded forms (no ';' left to hide behind).
    {"/v1/%2e%2e/admin", "/admin"},
    {"/v1/.%2e/admin", "/admin"},
    {"/v1/%2E./admin", "/admin"},
    {"/v1/%2E/x", "/v1/x"},
    {"/v1/x/%2e%2e/%2e%2e/%2e%2e/admin", "/admin"},
    // '?' and '#' stay encoded: never a query or a fragment.
    {"/v1/x%3Fa=1", "/v1/x%3Fa=1"},
    {"/v1/x%3f", "/v1/x%3F"},
    {"/v1/a%3F/../admin", "/v1/admin"},
    {"/v1/x%23frag", "/v1/x%23frag"},
    // Case is kept (see CaseIsKeptAndMatchedCaseSensitively).
    {"/V1/x", "/V1/x"},
    {"/%76%31/x", "/v1/x"},
    {"/%56%31/x", "/V1/x"},
    // Positive controls: legitimate targets pass unchanged.
    {"/repos/zn/zeroness", "/repos/zn/zeroness"},
    {"/a/b.json", "/a/b.json"},
    {"/files/caf%C3%A9", "/files/caf%C3%A9"},
    {"/files/caf%c3%a9", "/files/caf%C3%A9"},
    {"/files/%E2%82%AC", "/files/%E2%82%AC"},                    // euro sign
    {"/files/%E4%B8%AD%E6%96%87", "/files/%E4%B8%AD%E6%96%87"},  // CJK
    {"/files/%F0%9F%98%80", "/files/%F0%9F%98%80"},              // emoji, 4 bytes
    {"/files/%EF%BF%BD", "/files/%EF%BF%BD"},                    // U+FFFD
    {"/files/%F4%8F%BF%BF", "/files/%F4%8F%BF%BF"},              // U+10FFFF
    {"/files/%C2%A1", "/files/%C2%A1"},  // first code point after the C1 block and NBSP
    {"/files/%C3%BF", "/files/%C3%BF"},
    {"/files/a%20b", "/files/a%20b"},
    {"/files/%20a", "/files/%20a"},
    {"/files/100%25", "/files/100%25"},
    {"/files/100%25off", "/files/100%25off"},
    {"/files/a%25zz", "/files/a%25zz"},
    {"/v1/c++", "/v1/c++"},
    {"/v1/a+b", "/v1/a+b"},
    {"/v1/+", "/v1/+"},
    {"/.well-known/openid-configuration", "/.well-known/openid-configuration"},
    {"/v1/.b/..c/a.b.c", "/v1/.b/..c/a.b.c"},
    {"/v1/x/", "/v1/x/"},
    {"/v1/a:b/me@example.com", "/v1/a:b/me@example.com"},
    {"/v1/%3A%40", "/v1/%3A%40"},
    {"/v1/customers/cus_123/sources", "/v1/customers/cus_123/sources"},
};

TEST(NormaliseTarget, AmbiguityCorpus) {
  size_t refused = 0, accepted = 0;
  for (const Corpus& c : kCorpus) {
    std::string why;
    const auto t = normalise_target(c.in, &why);
    if (std::string_view(c.want) == "400") {
      EXPECT_FALSE(t.has_value()) << c.in << " normalised to " << (t ? t->path : "");
      EXPECT_FALSE(t.has_value() || why.empty()) << c.in;
      ++refused;
      continue;
    }
    ++accepted;
    ASSERT_TRUE(t.has_value()) << c.in << ": " << why;
    EXPECT_EQ(t->path, c.want) << c.in;
    EXPECT_FALSE(t->has_query) << c.in;
    // A fixed point: what we forward normalises to itself, unrefused.
    const auto again = normalise_target(t->path, &why);
    ASSERT_TRUE(again.has_value()) << t->path << ": " << why;
    EXPECT_EQ(again->path, t->path);
  }
  EXPECT_GT(refused, 100u);
  EXPECT_GT(accepted, 40u);
}

// Each refusal says which ambiguity it saw (the 400 body and audit carry it).
TEST(NormaliseTarget, RefusalsNameTheAmbiguity) {
  const std::pair<const char*, const char*> cases[] = {
      {"/v1/..;/admin", "path parameter (';') in path"},
      {"/v1/..%3B/admin", "encoded path parameter (%3B)"},
      {"/v1/%252e%252e/admin", "double-encoded escape (%25)"},
      {"/v1/%25u002e", "double-encoded escape (%25u)"},
      {"/v1/%u002e", "malformed percent-escape"},
      {"/v1/%C0%AE", "invalid UTF-8 in path"},
      {"/v1/%EF%BC%8F", "ambiguous Unicode character in path"},
      {"/v1/%0A", "encoded control character"},
      {"/admin.", "segment ends in '.' or space"},
      {"/v1/..+/x", "segment of dots and spaces"},
  };
  for (const auto& [in, reason] : cases) {
    std::string why;
    EXPECT_FALSE(normalise_target(in, &why).has_value()) << in;
    EXPECT_EQ(why, reason) << in;
  }
}

// A case-folding backend (IIS, ASP.NET routing) cannot reach a path no rule
// named: rules only allow and match case-sensitively, so "/V1/x" is simply
// not inside "/v1/**" and is refused (403) before it could be folded.
TEST(NormaliseTarget, CaseIsKeptAndMatchedCaseSensitively) {
  std::string why;
  const auto rule = broker::PathPattern::parse("/v1/**", &why);
  ASSERT_TRUE(rule) << why;
  for (const char* in : {"/V1/x", "/v1/../V1/x", "/%56%31/x"}) {
    const auto t = normalise_target(in);
    ASSERT_TRUE(t) << in;
    EXPECT_EQ(t->path, "/V1/x") << in;
    EXPECT_FALSE(rule->matches(t->path)) << in;
  }
  const auto ok = normalise_target("/%76%31/x");
  ASSERT_TRUE(ok);
  EXPECT_TRUE(rule->matches(ok->path));  // positive control
}

// Random targets from the pieces the corpus uses: whatever is accepted is a
// fixed point and carries none of what the table refuses; nothing crashes.
TEST(NormaliseTarget, AcceptedPathsAreFixedPointsFreeOfAmbiguity) {
  const char* pieces[] = {"/",  "//",  ".", "..",     "%2e",    "%2E",    "a",   "B",   ";",  "%3B",    "%25",
                          "32", "%20", "+", "%C3%A9", "%C0%AE", "%EF%BC", "%8F", "%2F", "\\", "%u002e", "%",
                          "2e", "%3F", "~", "%7E",    "%E2%80", "%A8",    "x.",  ".x",  "?",  "%0A"};
  std::mt19937 rng(9);
  std::uniform_int_distribution<size_t> pick(0, std::size(pieces) - 1), len(1, 12);
  size_t accepted = 0;
  for (int n = 0; n < 200000; ++n) {
    std::string in = "/";
    for (size_t k = len(rng); k > 0; --k) in += pieces[pick(rng)];
    const auto t = normalise_target(in);
    if (!t) continue;
    ++accepted;
    const std::string& p = t->path;
    ASSERT_EQ(p[0], '/') << in;
    EXPECT_EQ(p.find("//"), std::string::npos) << in;
    EXPECT_EQ(p.find(';'), std::string::npos) << in;
    EXPECT_EQ(p.find("%3B"), std::string::npos) << in;
    EXPECT_EQ(p.find("/./"), std::string::npos) << in;
    EXPECT_EQ(p.find("/../"), std::string::npos) << in;
    EXPECT_FALSE(p.ends_with("/.") || p.ends_with("/..")) << in;
    for (size_t pos = p.find("%25"); pos != std::string::npos; pos = p.find("%25", pos + 1))
      EXPECT_FALSE(pos + 5 <= p.size() && hex_value(p[pos + 3]) >= 0 && hex_value(p[pos + 4]) >= 0) << in;
    const auto again = normalise_target(p);
    ASSERT_TRUE(again) << in << " -> " << p;
    EXPECT_EQ(again->path, p) << in;
    if (HasFailure()) return;
  }
  EXPECT_GT(accepted, 1000u);
}

TEST(NormaliseTarget, Rejects) {
  for (const std::string& bad : std::initializer_list<std::string>{
           "",       "a/b",          "*",     "http://a/b", "?x",       "/%",
           "/%4",    "/%G1",         "/%1G",  "/a%2fb",     "/a%2Fb",   "/a%5cb",
           "/a%5Cb", "/a%00b",       "/a\\b", "/a b",       "/a\tb",    std::string("/a\0b", 4),
           "/a\x7f", "/caf\xc3\xa9", "/a#b",  "/a?b c",     "/a?b\x01", "/a?\xff",
           "/a?b#c", "/a/...",
       }) {
    std::string why;
    EXPECT_FALSE(normalise_target(bad, &why).has_value()) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  EXPECT_FALSE(normalise_target("/a%2fb").has_value());  // why is optional
}

}  // namespace
}  // namespace zn::http
