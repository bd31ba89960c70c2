// Secrets and tripwires found by rule (canonical_view.h), not by a list of
// encoders: random secrets (with '%', '\\', '&', '=', spaces, non-ASCII) in
// each encoding family with a random subset of bytes escaped and random hex
// case, wrapped base64 at several widths, UTF-16/UTF-32 with and without a
// BOM, RFC 5987/2231, quoted-printable soft breaks, HTML references mixed
// decimal/hex. The encoders here are written from the specifications, not
// taken from the code under test. Each case is streamed at random cuts (and
// every cut for short ones) and has a positive control: the same encoding of
// the secret with one byte changed passes byte-identical; ordinary text and
// binary data pass unchanged. The seed is fixed.
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <algorithm>
#include <functional>
#include <random>

#include "userspace/proxy/canonical_view.h"
#include "userspace/proxy/request_screen.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy {
namespace {

using Rng = std::mt19937;

// Code points a secret is made of: the escape leads of every family, space,
// Latin-1, BMP and astral characters.
const std::vector<uint32_t> kAlphabet = [] {
  std::vector<uint32_t> a;
  for (char c = 'a'; c <= 'z'; ++c) a.push_back(static_cast<uint32_t>(c));
  for (char c = '0'; c <= '9'; ++c) a.push_back(static_cast<uint32_t>(c));
  for (char c : std::string("%\\&=+/ \"'<>;#_-~")) a.push_back(static_cast<unsigned char>(c));
  for (uint32_t cp : {0xe9u, 0xfcu, 0x20acu, 0x4e2du, 0x1f600u}) a.push_back(cp);
  return a;
}();

void utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string utf8(const std::vector<uint32_t>& cps) {
  std::string out;
  for (uint32_t cp : cps) utf8(cp, out);
  return out;
}

std::vector<uint32_t> random_secret(Rng& rng) {
  std::vector<uint32_t> cps;
  const size_t n = 16 + rng() % 24;
  // Starts and ends with a letter: a token's shape, and no escape lead at
  // either edge for a neighbour to complete (canonical_view.h: not covered).
  cps.push_back('a' + rng() % 26);
  while (cps.size() < n - 1) {
    const uint32_t c = kAlphabet[rng() % kAlphabet.size()];
    cps.push_back(c);
    // An escape lead is followed by a byte that starts no escape: a secret
    // that itself reads as an escape ("%41") is found spelled consistently
    // (its own escapes all kept or all decoded), not half and half
    // (canonical_view.h).
    if (c == '%' || c == '\\' || c == '&') cps.push_back('z');
  }
  cps.push_back('a' + rng() % 26);
  return cps;
}

// The same secret with one code point in the middle changed.
std::vector<uint32_t> near_miss(std::vector<uint32_t> cps) {
  uint32_t& c = cps[cps.size() / 2];
  c = c == 'q' ? 'r' : 'q';
  return cps;
}

std::string hex2(unsigned char b, bool upper) {
  const char* d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  return {d[b >> 4], d[b & 15]};
}
bool coin(Rng& rng) { return (rng() & 1) != 0; }

// Percent-encoding with a random keep-set: '%' always escaped (else it is
// not percent-encoding), every other byte escaped or not at random, each
// escape in a random hex case.
std::string percent_any(const std::string& s, Rng& rng) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '%' || c >= 0x80 || coin(rng)) {
      out += "%" + hex2(c, coin(rng));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string json_any(const std::vector<uint32_t>& cps, Rng& rng) {
  std::string out;
  auto u = [&](uint32_t unit) {
    const bool up = coin(rng);
    out +=
        "\\u" + hex2(static_cast<unsigned char>(unit >> 8), up) + hex2(static_cast<unsigned char>(unit), up);
  };
  for (uint32_t cp : cps) {
    if (cp == '"' || cp == '\\') {
      if (coin(rng)) {
        out += "\\" + std::string(1, static_cast<char>(cp));
      } else {
        u(cp);
      }
    } else if (cp == '/' && coin(rng)) {
      out += "\\/";
    } else if (coin(rng)) {
      if (cp >= 0x10000) {
        u(0xd800 + ((cp - 0x10000) >> 10));
        u(0xdc00 + ((cp - 0x10000) & 0x3ff));
      } else {
        u(cp);
      }
    } else {
      utf8(cp, out);
    }
  }
  return out;
}

std::string backslash_x_any(const std::string& s, Rng& rng) {
  std::string out;
  for (unsigned char c : s)
    out += c == '\\' || coin(rng) ? "\\x" + hex2(c, coin(rng)) : std::string(1, static_cast<char>(c));
  return out;
}

// HTML/XML: decimal and hex references mixed, named ones for the five.
std::string html_any(const std::vector<uint32_t>& cps, Rng& rng) {
  std::string out;
  for (uint32_t cp : cps) {
    const int how = static_cast<int>(rng() % 3);
    if (cp == '&' && how == 0) {
      out += "&amp;";
    } else if (cp == '<' && how == 0) {
      out += "&lt;";
    } else if (cp == '"' && how == 0) {
      out += "&quot;";
    } else if (cp == '&' || how == 1) {
      out += "&#" + std::to_string(cp) + ";";
    } else if (how == 2) {
      char buf[16];
      snprintf(buf, sizeof buf, coin(rng) ? "&#x%X;" : "&#x%x;", cp);
      out += buf;
    } else {
      utf8(cp, out);
    }
  }
  return out;
}

// Quoted-printable: '=' and 8-bit bytes always escaped, others at random,
// soft line breaks (=CRLF or =LF) at random places between units.
std::string qp_any(const std::string& s, Rng& rng) {
  std::string out;
  for (unsigned char c : s) {
    if (rng() % 5 == 0) out += coin(rng) ? "=\r\n" : "=\n";
    out +=
        c == '=' || c >= 0x80 || coin(rng) ? "=" + hex2(c, coin(rng)) : std::string(1, static_cast<char>(c));
  }
  return out;
}

std::string base64(const std::string& in, bool url) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  out.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                 reinterpret_cast<const unsigned char*>(in.data()),
                                                 static_cast<int>(in.size()))));
  if (url)
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

// MIME-style: a blob around the secret, base64 wrapped at `width`.
std::string base64_wrapped(const std::string& s, Rng& rng, size_t width, const char* eol) {
  std::string blob = std::string(rng() % 7, 'x') + s + std::string(rng() % 5, 'y');
  const std::string b = base64(blob, false);
  std::string out;
  for (size_t at = 0; at < b.size(); at += width) out += b.substr(at, width) + eol;
  return out;
}

std::string wide(const std::vector<uint32_t>& cps, bool utf32, bool be, bool bom) {
  std::string out;
  auto unit = [&](uint32_t u, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(u >> (be ? 8 * (bytes - 1 - i) : 8 * i)));
  };
  if (bom) unit(0xfeff, utf32 ? 4 : 2);
  for (uint32_t cp : cps) {
    if (utf32) {
      unit(cp, 4);
    } else if (cp >= 0x10000) {
      unit(0xd800 + ((cp - 0x10000) >> 10), 2);
      unit(0xdc00 + ((cp - 0x10000) & 0x3ff), 2);
    } else {
      unit(cp, 2);
    }
  }
  return out;
}

struct Family {
  std::string name;
  std::function<std::string(const std::vector<uint32_t>&, Rng&)> encode;
};

std::vector<Family> families() {
  std::vector<Family> f = {
      {"percent, any subset", [](const auto& c, Rng& r) { return percent_any(utf8(c), r); }},
      {"RFC 5987", [](const auto& c, Rng& r) { return "filename*=UTF-8''" + percent_any(utf8(c), r); }},
      {"json \\u any subset", [](const auto& c, Rng& r) { return json_any(c, r); }},
      {"\\xHH any subset", [](const auto& c, Rng& r) { return backslash_x_any(utf8(c), r); }},
      {"html dec/hex mixed", [](const auto& c, Rng& r) { return html_any(c, r); }},
      {"quoted-printable", [](const auto& c, Rng& r) { return qp_any(utf8(c), r); }},
      {"base64 wrapped 64 LF", [](const auto& c, Rng& r) { return base64_wrapped(utf8(c), r, 64, "\n"); }},
      {"base64 wrapped 8 CRLF", [](const auto& c, Rng& r) { return base64_wrapped(utf8(c), r, 8, "\r\n"); }},
      {"base64url", [](const auto& c, Rng& r) { return base64(std::string(r() % 3, 'u') + utf8(c), true); }},
  };
  for (const char* eol : {"\r\n", "\n"})
    f.push_back({eol[0] == '\r' ? "base64 wrapped 76 CRLF" : "base64 wrapped 76 LF",
                 [eol](const auto& c, Rng& r) { return base64_wrapped(utf8(c), r, 76, eol); }});
  for (bool utf32 : {false, true})
    for (bool be : {false, true})
      for (bool bom : {false, true}) {
        f.push_back({std::string(utf32 ? "UTF-32" : "UTF-16") + (be ? "BE" : "LE") + (bom ? " BOM" : ""),
                     [=](const auto& c, Rng&) { return wide(c, utf32, be, bom); }});
      }
  return f;
}

std::string scrub_cut(const SecretScrubber& s, const std::string& in, const std::vector<size_t>& cuts,
                      ScrubReport* report = nullptr) {
  SecretScrubber::Stream stream(s);
  std::string out;
  size_t from = 0;
  for (size_t cut : cuts) {
    stream.feed(std::string_view(in).substr(from, cut - from), out);
    from = cut;
  }
  stream.feed(std::string_view(in).substr(from), out);
  stream.finish(out);
  if (report) *report = stream.report();
  return out;
}

std::vector<size_t> random_cuts(Rng& rng, size_t size) {
  std::vector<size_t> cuts;
  for (size_t c = rng() % 5; c < size; c += 1 + rng() % 23) cuts.push_back(c);
  return cuts;
}

const std::string kText = "Lorem ipsum dolor sit amet, \"quoted\" & <tagged> 100% = \\ value; ";

TEST(ScrubByRule, EveryFamilyWithRandomEscapesIsRedactedAndANearMissPassesUnchanged) {
  Rng rng(30);
  size_t cases = 0;
  for (int round = 0; round < 40; ++round) {
    const std::vector<uint32_t> secret = random_secret(rng);
    SecretScrubber s;
    ASSERT_TRUE(s.add_secret(utf8(secret), "cap:x"));
    for (const Family& f : families()) {
      SCOPED_TRACE(f.name + " round " + std::to_string(round));
      const std::string spelled = f.encode(secret, rng);
      const std::string body = kText.substr(0, rng() % kText.size()) + " " + spelled + kText;
      ScrubReport rep;
      const std::string whole = scrub_cut(s, body, {}, &rep);
      ASSERT_EQ(whole.size(), body.size());
      EXPECT_GE(rep.matches, 1u) << spelled;
      // Nothing findable is left, and the spelling is mostly marker.
      EXPECT_EQ(s.detect(whole).matches, 0u) << whole;
      size_t changed = 0;
      for (size_t i = 0; i < body.size(); ++i) changed += body[i] != whole[i];
      EXPECT_GE(changed, 8u) << whole;
      // Split anywhere, the same bytes come out.
      EXPECT_EQ(scrub_cut(s, body, random_cuts(rng, body.size())), whole);
      // Positive control: one byte of the secret changed, the same family.
      const std::string miss = kText + f.encode(near_miss(secret), rng) + kText;
      std::string out = miss;
      EXPECT_EQ(s.scrub(out).matches, 0u);
      EXPECT_EQ(out, miss);
      ++cases;
    }
  }
  EXPECT_GE(cases, 40u * 17u);
}

TEST(ScrubByRule, EveryCutOfAShortSpellingGivesTheSameOutput) {
  Rng rng(31);
  const std::vector<uint32_t> secret = random_secret(rng);
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret(utf8(secret), "cap:x"));
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const std::string body = "<" + f.encode(secret, rng) + ">";
    const std::string whole = scrub_cut(s, body, {});
    for (size_t i = 0; i <= body.size(); ++i) {
      ASSERT_EQ(scrub_cut(s, body, {i}), whole) << i;
      const size_t j = i + (body.size() - i) / 2;
      ASSERT_EQ(scrub_cut(s, body, {i, j}), whole) << i << "," << j;
    }
  }
}

TEST(ScrubByRule, OrdinaryTextAndBinaryPassUnchanged) {
  Rng rng(32);
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret("sk_live_zerod_%41&amp;_\\u0041", "cap:x"));
  std::string binary;
  for (int i = 0; i < 1 << 16; ++i) binary.push_back(static_cast<char>(rng()));
  std::string text;
  while (text.size() < 1 << 16) text += kText + "=41 %2F &#65; \\u0041 \r\n";
  for (const std::string& in : {binary, text, std::string(70000, '\0'), std::string(70000, '\n')}) {
    ScrubReport rep;
    EXPECT_EQ(scrub_cut(s, in, random_cuts(rng, in.size()), &rep), in);
    EXPECT_EQ(rep.matches, 0u);
  }
}

// The same canonical reading of each spelling, independent of the scrubber.
TEST(ScrubByRule, TheCanonicalViewsDecodeOneLevelOfEscapes) {
  using M = Canonicaliser::Mode;
  EXPECT_EQ(canonical("a%41%4a%4A\\x4b\\u004C\\u00e9&#77;&#x4e;&#X4F;&amp;&LT;", M::kEscapes),
            "aAJJKL\xc3\xa9MNO&<");
  EXPECT_EQ(canonical("\\ud83d\\ude00 \\\" \\/ \\n", M::kEscapes), "\xf0\x9f\x98\x80 \" / ");
  EXPECT_EQ(canonical("%2541 %4 %zz & &#; &#x; \\q \\ud83d!", M::kEscapes),
            "%41 %4 %zz & &#; &#x; \\q \\ud83d!");
  EXPECT_EQ(canonical(std::string("l\0i\0n\0e\0\r\0\n\0", 12), M::kEscapes), "line");
  EXPECT_EQ(canonical(std::string("a\0b\0", 4), M::kEscapes), "ab");
  // UTF-32 of an escaped surrogate pair: its zero bytes do not break it.
  std::string utf32;
  for (char c : std::string("\\ud83d\\ude00ab")) utf32 += std::string(1, c) + std::string(3, '\0');
  EXPECT_EQ(canonical(utf32, M::kEscapes),
            "\xf0\x9f\x98\x80"
            "ab");
  EXPECT_EQ(canonical("ab=\r\ncd=\nef=3D=3d=41", M::kQuotedPrintable), "abcdef==A");
  EXPECT_EQ(canonical("k=41", M::kEscapes), "k=41");  // '=' is not an escape here
  // A long run of dropped bytes breaks the view.
  std::string broken;
  Canonicaliser c(M::kEscapes);
  int breaks = 0;
  const std::string in = "ab" + std::string(20, '\n') + "cd";
  for (size_t i = 0; i < in.size(); ++i)
    c.push(static_cast<unsigned char>(in[i]), i, [&](int b, uint64_t, uint64_t) {
      if (b < 0) ++breaks;
    });
  EXPECT_EQ(breaks, 1);
}

// A lead given up at once (the scrubber then takes it as a plain byte) is
// exactly one the view reads as itself and then reads on from the next byte.
TEST(ScrubByRule, ALeadGivenUpAtOnceIsItsOwnCanonicalByte) {
  using M = Canonicaliser::Mode;
  EXPECT_TRUE(Canonicaliser::literal_lead(M::kEscapes, '%', 'G'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kEscapes, '%', '4'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kEscapes, '%', 'a'));
  EXPECT_TRUE(Canonicaliser::literal_lead(M::kEscapes, '&', 'z'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kEscapes, '&', '#'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kEscapes, '\\', 'u'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kEscapes, '%', '\0'));  // a NUL inside an escape is dropped
  EXPECT_TRUE(Canonicaliser::literal_lead(M::kQuotedPrintable, '=', 'z'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kQuotedPrintable, '=', '\n'));
  EXPECT_FALSE(Canonicaliser::literal_lead(M::kQuotedPrintable, '%', 'G'));  // not a lead there
  for (M m : {M::kEscapes, M::kQuotedPrintable})
    for (int lead : {'%', '\\', '&', '='})
      for (int next = 0; next < 256; ++next) {
        if (!Canonicaliser::literal_lead(m, static_cast<unsigned char>(lead),
                                         static_cast<unsigned char>(next)))
          continue;
        const std::string after = std::string(1, static_cast<char>(next)) + "x41y";
        EXPECT_EQ(canonical(std::string(1, static_cast<char>(lead)) + after, m),
                  std::string(1, static_cast<char>(lead)) + canonical(after, m))
            << lead << " " << next;
      }
}

TEST(ScrubByRule, RFC2231ContinuationsInAHeadAreJoinedAndRedacted) {
  const std::string secret = "sk_live_2231_secret_value_77";
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret(secret, "cap:x"));
  const std::vector<std::string> heads = {
      "Content-Disposition: attachment; title*0*=UTF-8''sk_live_22; title*1*=31_secret%5f; "
      "title*2=\"value_77\"\r\n\r\n",
      "Content-Type: text/plain; name*1=\"t_value_77\"; name*0=\"sk_live_2231_secre\"\r\n\r\n",
      "X-A: a; t*0*=us-ascii'en'sk%5Flive%5F2231; t*1*=%5fsecret; t*2*=%5Fvalue%5F77\r\n\r\n",
  };
  for (const std::string& head : heads) {
    std::string out = head;
    const ScrubReport rep = s.scrub(out);
    EXPECT_GE(rep.matches, 1u) << head;
    EXPECT_EQ(out.size(), head.size());
    EXPECT_EQ(out.find("secret"), std::string::npos) << out;
    EXPECT_NE(out.find("\r\n\r\n"), std::string::npos);
    // Positive control: the same continuations of another value.
    std::string miss = head;
    miss.replace(miss.find("secre"), 5, "secrX");
    const std::string before = miss;
    EXPECT_EQ(s.scrub(miss).matches, 0u) << miss;
    EXPECT_EQ(miss, before);
  }
}

// A WebSocket's messages: one stream, each message delivered at its end.
std::string messages(const SecretScrubber& s, const std::string& in, const std::vector<size_t>& ends) {
  SecretScrubber::Stream stream(s);
  std::string out;
  size_t from = 0;
  for (size_t end : ends) {
    stream.feed(std::string_view(in).substr(from, end - from), out);
    stream.end_message(out);
    EXPECT_EQ(stream.held(), 0u);
    EXPECT_EQ(out.size(), end);
    from = end;
  }
  stream.feed(std::string_view(in).substr(from), out);
  stream.end_message(out);
  return out;
}

TEST(ScrubByRule, ASecretSplitAcrossTwoOrThreeMessagesNeverArrivesWhole) {
  Rng rng(33);
  const std::string secret = "sk_live_split_ws_9f8e7d6c5b4a3210";
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret(secret, "cap:x"));
  // (as sent, what the guest must not get 12 bytes in a row of once read)
  for (const auto& [spelled, plain] :
       std::vector<std::pair<std::string, std::string>>{{secret, secret},
                                                        {base64(secret, false), base64(secret, false)},
                                                        {"sk%5flive%5Fsplit_ws_9f8e7d%36c5b4a3210", secret},
                                                        {"sk_live_split\u005fws_9f8e7d6c5b4a3210", secret}}) {
    SCOPED_TRACE(spelled);
    const std::string body = "{\"echo\":\"" + spelled + "\"}";
    for (size_t i = 1; i < body.size(); ++i) {
      for (size_t j : {i, i + (body.size() - i) / 2}) {
        std::vector<size_t> ends = {i};
        if (j > i) ends.push_back(j);
        const std::string out = messages(s, body, ends);
        ASSERT_EQ(out.size(), body.size());
        // What the guest gets of the secret: at most the first bytes of one
        // message's tail (below the boundary redaction), never 12 in a row.
        const std::string got = canonical(out, Canonicaliser::Mode::kEscapes);
        for (size_t k = 0; k + 12 <= plain.size(); ++k)
          ASSERT_EQ(got.find(plain.substr(k, 12)), std::string::npos) << i << "," << j << ": " << out;
      }
    }
  }
  // Positive controls: a message that ends in text that begins no secret is
  // delivered as is; one ending in the secret's first 3 bytes too (below
  // the bound: a guess of so few bytes must not be confirmed).
  const std::string plain = "{\"echo\":\"sk_lime_split\"}";
  EXPECT_EQ(messages(s, plain, {plain.size() - 2}), plain);
  const std::string three = "hello sk_";
  EXPECT_EQ(messages(s, three + "zzz", {three.size()}), three + "zzz");
}

// The request side, same rule: a canary in a UTF-16 body, in a multipart
// part with Content-Transfer-Encoding base64 (wrapped) or quoted-printable,
// percent/JSON with odd subsets; streamed through the screen at random cuts.
TEST(ScrubByRule, TheRequestScreenFindsCanariesByTheSameRule) {
  Rng rng(34);
  const std::string canary = "AKIA_canary=%20&x\\9Z";
  const std::vector<uint32_t> cps(canary.begin(), canary.end());
  RequestScreen screen;
  ASSERT_TRUE(screen.arm({{canary, "canary:0"}}));
  auto part = [](const std::string& cte, const std::string& content) {
    return "--b0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\n"
           "Content-Transfer-Encoding: " +
           cte + "\r\n\r\n" + content + "\r\n--b0undary--\r\n";
  };
  auto bodies = [&](const std::vector<uint32_t>& c) {
    const std::string s = utf8(c);
    std::string big = std::string(300, 'q') + s + std::string(200, 'r');
    return std::vector<std::string>{
        wide(c, false, false, true),
        wide(c, false, true, false),
        part("base64", base64_wrapped(big, rng, 76, "\r\n")),
        part("quoted-printable", qp_any(s, rng)),
        "k=" + percent_any(s, rng),
        "{\"k\":\"" + json_any(c, rng) + "\"}",
        "<p>" + html_any(c, rng) + "</p>",
    };
  };
  const auto hit = bodies(cps);
  const auto miss = bodies(near_miss(cps));
  for (size_t b = 0; b < hit.size(); ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(screen.check(hit[b], {}), std::vector<std::string>{"canary:0"});
    EXPECT_TRUE(screen.check(miss[b], {}).empty());
    for (int round = 0; round < 5; ++round) {
      StreamScreen stream(screen, {});
      std::string out;
      std::vector<std::string> found;
      size_t from = 0;
      for (size_t cut : random_cuts(rng, hit[b].size())) {
        found = stream.feed(std::string_view(hit[b]).substr(from, cut - from), out);
        from = cut;
        if (!found.empty()) break;
      }
      if (found.empty()) found = stream.feed(std::string_view(hit[b]).substr(from), out);
      if (found.empty()) found = stream.finish(out);
      EXPECT_EQ(found, std::vector<std::string>{"canary:0"});
      EXPECT_EQ(out, hit[b].substr(0, out.size()));
      // Positive control: the near miss goes through whole, in order.
      StreamScreen clean(screen, {});
      std::string passed;
      from = 0;
      for (size_t cut : random_cuts(rng, miss[b].size())) {
        EXPECT_TRUE(clean.feed(std::string_view(miss[b]).substr(from, cut - from), passed).empty());
        from = cut;
      }
      EXPECT_TRUE(clean.feed(std::string_view(miss[b]).substr(from), passed).empty());
      EXPECT_TRUE(clean.finish(passed).empty());
      EXPECT_EQ(passed, miss[b]);
    }
  }
}

// A guest's WebSocket messages screened as one stream: a canary split over
// two messages is found when the second arrives.
TEST(ScrubByRule, ACanarySplitAcrossGuestMessagesIsFound) {
  RequestScreen screen;
  const std::string canary = "AKIAZNCANARY00001";
  ASSERT_TRUE(screen.arm({{canary, "canary:0"}}));
  for (size_t i = 1; i < canary.size(); ++i) {
    StreamScreen stream(screen, {});
    std::string out;
    EXPECT_TRUE(stream.feed("msg " + canary.substr(0, i), out).empty());
    EXPECT_TRUE(stream.end_message(out).empty());
    EXPECT_EQ(out, "msg " + canary.substr(0, i));  // a message goes whole
    EXPECT_EQ(stream.feed(canary.substr(i) + " end", out), std::vector<std::string>{"canary:0"}) << i;
  }
  StreamScreen stream(screen, {});
  std::string out;
  EXPECT_TRUE(stream.feed("msg AKIAZNCANA", out).empty());
  EXPECT_TRUE(stream.end_message(out).empty());
  EXPECT_TRUE(stream.feed("RY00002 end", out).empty());
  EXPECT_TRUE(stream.finish(out).empty());
}

// The canonical views skip ahead inside a plain run once they are in the
// as-sent view's state (secret_scrubber.cpp scan_view): the same bytes out,
// the same report and the same redacted ranges as views that step every
// byte, over bodies of plain runs, escapes, line breaks, binary bytes and
// the secrets in every family (raw ones inside plain runs, where the views
// skip), at random cuts, in both modes.
struct Scanned {
  std::string out;
  ScrubReport report;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // merged
};

Scanned scan(const SecretScrubber& s, const std::string& in, const std::vector<size_t>& cuts, bool every_byte,
             SecretScrubber::Stream::Mode mode) {
  SecretScrubber::Stream stream(s, mode);
  if (every_byte) stream.step_every_byte();
  std::vector<std::pair<uint64_t, uint64_t>> found;
  stream.record_matches(&found);
  Scanned r;
  size_t from = 0;
  for (size_t cut : cuts) {
    stream.feed(std::string_view(in).substr(from, cut - from), r.out);
    from = cut;
  }
  stream.feed(std::string_view(in).substr(from), r.out);
  stream.finish(r.out);
  r.report = stream.report();
  std::sort(found.begin(), found.end());
  for (const auto& f : found) {
    if (!r.ranges.empty() && f.first <= r.ranges.back().second) {
      r.ranges.back().second = std::max(r.ranges.back().second, f.second);
    } else {
      r.ranges.push_back(f);
    }
  }
  return r;
}

// One body in both modes, cut at random in odd rounds: the skipping's
// output, report and redacted ranges against stepping every byte. The
// reference's reports, one per mode (a test's positive control).
std::vector<ScrubReport> expect_skipping_agrees(const SecretScrubber& s, const std::string& body, Rng& rng,
                                                int round) {
  std::vector<ScrubReport> reports;
  for (auto mode : {SecretScrubber::Stream::Mode::kRedact, SecretScrubber::Stream::Mode::kDetect}) {
    const std::vector<size_t> cuts = round % 2 ? random_cuts(rng, body.size()) : std::vector<size_t>{};
    const Scanned fast = scan(s, body, cuts, false, mode), every = scan(s, body, cuts, true, mode);
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(fast.out, every.out);
    EXPECT_EQ(fast.report.matches, every.report.matches);
    EXPECT_EQ(fast.report.encodings, every.report.encodings);
    EXPECT_EQ(fast.report.secrets, every.report.secrets);
    EXPECT_EQ(fast.ranges, every.ranges);
    reports.push_back(every.report);
  }
  return reports;
}

TEST(ScrubByRule, SkippingAheadInPlainRunsChangesNothing) {
  Rng rng(31);
  const std::vector<Family> fams = families();
  size_t cases = 0, matched = 0;
  for (int round = 0; round < 60; ++round) {
    SecretScrubber s;
    std::vector<std::string> secrets;
    for (size_t n = 1 + rng() % 3; secrets.size() < n;) {
      secrets.push_back(utf8(random_secret(rng)));
      ASSERT_TRUE(s.add_secret(secrets.back(), "cap:" + std::to_string(secrets.size())));
    }
    std::string body;
    while (body.size() < 4096) {
      switch (rng() % 6) {
        case 0:
          body += kText.substr(rng() % kText.size());
          break;
        case 1:
          body += secrets[rng() % secrets.size()];  // raw, in a plain run
          break;
        case 2:
          body += fams[rng() % fams.size()].encode(random_secret(rng), rng);
          break;
        case 3: {
          const std::vector<uint32_t> cps = random_secret(rng);
          body += fams[rng() % fams.size()].encode(cps, rng);
          break;
        }
        case 4:
          for (int i = 0; i < 64; ++i) body.push_back(static_cast<char>(rng()));
          break;
        default:
          body += std::string(1 + rng() % 200, "abc%\\&=\r\n"[rng() % 9]);
      }
      // A secret of this scrubber in a random family now and then.
      if (rng() % 4 == 0) {
        std::string_view sec = secrets[rng() % secrets.size()];
        std::vector<uint32_t> cps;
        for (unsigned char c : sec) cps.push_back(c);  // Latin-1 view of its bytes: still a spelling of bytes
        body += fams[rng() % fams.size()].encode(cps, rng);
      }
    }
    for (const ScrubReport& every : expect_skipping_agrees(s, body, rng, round)) {
      matched += every.matches > 0;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 120u);
  EXPECT_GE(matched, 100u);  // the bodies hold secrets: both found them
}

// The skipping's own shortcuts (secret_scrubber.cpp scan_view, the bytes it
// passes without the automaton): escape leads given up at once, runs of
// dropped bytes (1 to 10, past kMaxDropped the view breaks) between plain
// bytes, with and without a pattern pair across them either as read or as
// sent; inside secrets (which the views must then find), between pairs of
// their bytes, in random bytes, at random cuts: the same as stepping every
// byte. Positive control: the bodies hold secrets only a canonical view
// finds (kDecoded), and both find them.
TEST(ScrubByRule, SkippingOverDroppedBytesAndLiteralLeadsChangesNothing) {
  Rng rng(32);
  const std::string drops("\r\n", 2), leads_given_up[] = {"%G", "%%", "\\q", "&z", "&#x;", "=z", "=\r="};
  auto drop_run = [&] {
    std::string r;
    for (size_t n = 1 + rng() % 10; r.size() < n;) r.push_back(rng() % 3 == 0 ? '\0' : drops[rng() % 2]);
    return r;
  };
  size_t decoded = 0;
  for (int round = 0; round < 80; ++round) {
    SecretScrubber s;
    std::string secret;
    for (size_t n = 12 + rng() % 20; secret.size() < n;)
      secret.push_back(static_cast<char>('a' + rng() % 26));
    if (round % 3 == 1) secret[1 + rng() % (secret.size() - 2)] = drops[rng() % 2];  // a PEM-like line break
    if (round % 3 == 2) secret[1 + rng() % (secret.size() - 2)] = '\0';
    if (round % 4 == 3) secret[0] = drops[rng() % 2];  // a secret that starts with a line break
    ASSERT_TRUE(s.add_secret(secret, "cap:0"));
    std::string body;
    while (body.size() < 4096) {
      switch (rng() % 6) {
        case 0: {  // the secret with dropped bytes inside
          std::string t;
          for (char c : secret) {
            t.push_back(c);
            if (rng() % 4 == 0) t += drop_run();
          }
          body += t;
          break;
        }
        case 1:  // two bytes of the secret (a pattern pair) around dropped bytes, and the reverse
          for (int i = 0; i < 8; ++i) {
            const size_t at = rng() % (secret.size() - 1);
            body.push_back(secret[rng() % 2 ? at : at + 1]);
            body += drop_run();
            body.push_back(secret[at + 1]);
            body.push_back(secret[rng() % secret.size()]);
          }
          break;
        case 2:  // leads given up, alone and inside the secret
          for (int i = 0; i < 8; ++i) {
            body += leads_given_up[rng() % std::size(leads_given_up)];
            body.push_back(static_cast<char>('a' + rng() % 26));
          }
          body += secret.substr(0, secret.size() / 2) + leads_given_up[rng() % std::size(leads_given_up)] +
                  secret.substr(secret.size() / 2);
          break;
        case 3:
          for (int i = 0; i < 96; ++i) body.push_back(static_cast<char>(rng()));
          break;
        case 4:  // a long run of zeros (past kMaxDropped: the view breaks), a secret across a short one
          body += secret.substr(0, secret.size() / 2) + std::string(rng() % 300, '\0');
          body += secret.substr(0, secret.size() / 2) + std::string(1 + rng() % 9, '\0') +
                  secret.substr(secret.size() / 2);
          break;
        default:
          body += kText.substr(rng() % kText.size()) + secret;
      }
    }
    for (const ScrubReport& every : expect_skipping_agrees(s, body, rng, round))
      decoded += (every.encodings >> static_cast<unsigned>(SecretEncoding::kDecoded)) & 1;
  }
  EXPECT_GE(decoded, 150u);
}

}  // namespace
}  // namespace zn::proxy
