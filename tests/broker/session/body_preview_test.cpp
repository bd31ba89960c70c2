// What an operator is shown of a held request's body: no secret of the
// policy in any encoding, not even its first bytes cut off by the preview's
// end; everything else as it was, non-printable bytes escaped.
#include "broker/session/body_preview.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

// Needs percent-encoding ('/', '+', '=', ' ') and is long enough to be
// looked for in every encoding.
constexpr std::string_view kSecret = "sk_live/preview+Te5t= 0042";

std::string base64(std::string_view v, int variant) {
  std::string b(sodium_base64_encoded_len(v.size(), variant), '\0');
  sodium_bin2base64(b.data(), b.size(), reinterpret_cast<const unsigned char*>(v.data()), v.size(), variant);
  b.resize(b.size() - 1);
  return b;
}

std::string hex(std::string_view v) {
  std::string h(v.size() * 2 + 1, '\0');
  sodium_bin2hex(h.data(), h.size(), reinterpret_cast<const unsigned char*>(v.data()), v.size());
  h.resize(h.size() - 1);
  return h;
}

std::string redact(std::string_view raw) { return redact_body_preview(raw, {kSecret}); }

TEST(BodyPreview, PlainBytesAreKeptAndTheRestEscaped) {
  EXPECT_EQ(redact("amount=500&currency=eur"), "amount=500&currency=eur");
  EXPECT_EQ(redact(std::string("a\0b\n\x7f\xc3\xa9\\", 8)), "a\\x00b\\x0a\\x7f\\xc3\\xa9\\\\");
  EXPECT_EQ(redact(""), "");
}

TEST(BodyPreview, OnlyTheFirst256BytesAreShown) {
  EXPECT_EQ(redact(std::string(300, 'a')), std::string(256, 'a'));
}

TEST(BodyPreview, EachEncodingOfASecretIsRedacted) {
  const std::vector<std::pair<std::string, std::string>> forms = {
      {"raw", std::string(kSecret)},
      {"base64", base64(kSecret, sodium_base64_VARIANT_ORIGINAL)},
      {"base64url", base64(kSecret, sodium_base64_VARIANT_URLSAFE_NO_PADDING)},
      {"hex", hex(kSecret)},
      {"percent", "sk_live%2Fpreview%2BTe5t%3D%200042"},
      {"percent (form)", "sk_live%2fpreview%2bTe5t%3d+0042"},
  };
  for (const auto& [name, form] : forms) {
    const std::string out = redact("before " + form + " after");
    EXPECT_EQ(out.find(form), std::string::npos) << name << ": " << out;
    EXPECT_EQ(out.rfind("before ", 0), 0u) << name << ": " << out;
    EXPECT_NE(out.find("<redacted>"), std::string::npos) << name << ": " << out;
    EXPECT_EQ(out.substr(out.size() - 6), " after") << name << ": " << out;
  }
  // Base64 inside a longer blob (Basic user:secret), at another alignment.
  const std::string basic = base64("u:" + std::string(kSecret), sodium_base64_VARIANT_ORIGINAL);
  EXPECT_EQ(redact("Basic " + basic).find(basic.substr(4, 20)), std::string::npos)
      << redact("Basic " + basic);
}

// By rule, not by list (the proxy scrubber's views): spellings no encoder
// list names are hidden too; the text around them is kept.
TEST(BodyPreview, SpellingsByRuleAreRedactedToo) {
  const std::string s(kSecret);
  std::string odd_percent;  // every other byte escaped, lower-case hex
  for (size_t i = 0; i < s.size(); ++i) {
    if (i % 2) {
      static constexpr char kHex[] = "0123456789abcdef";
      odd_percent += '%';
      odd_percent += kHex[static_cast<unsigned char>(s[i]) >> 4];
      odd_percent += kHex[static_cast<unsigned char>(s[i]) & 0xf];
    } else {
      odd_percent += s[i];
    }
  }
  std::string utf16le;
  for (char c : s) utf16le += std::string{c, '\0'};
  std::string wrapped = base64(s, sodium_base64_VARIANT_ORIGINAL);
  wrapped.insert(16, "\r\n");
  const std::vector<std::pair<std::string, std::string>> forms = {
      {"percent, odd bytes", odd_percent},
      {"utf-16le", utf16le},
      {"base64 wrapped", wrapped},
      {"json \\u", "sk_live\\u002fpreview\\u002bTe5t\\u003d\\u00200042"},
  };
  for (const auto& [name, form] : forms) {
    const std::string out = redact("before " + form + " after");
    EXPECT_NE(out.find("<redacted>"), std::string::npos) << name << ": " << out;
    EXPECT_EQ(out.find("preview"), std::string::npos) << name << ": " << out;
    EXPECT_EQ(out.rfind("before ", 0), 0u) << name << ": " << out;
    EXPECT_EQ(out.substr(out.size() - 6), " after") << name << ": " << out;
  }
  // Positive control: the same spellings of another value are shown.
  EXPECT_EQ(redact("sk_live%2fother"), "sk_live%2fother");
}

TEST(BodyPreview, ASecretCutOffAtThePreviewsEndLeavesNoPrefix) {
  for (size_t kept = 1; kept < kSecret.size(); ++kept) {
    const std::string body = std::string(256 - kept, 'x') + std::string(kSecret);  // 256 - kept + full
    const std::string out = redact(body);
    const std::string cut(kSecret.substr(0, kept));
    if (kept >= BodyPreview::kMinPartial) {
      EXPECT_EQ(out, std::string(256 - kept, 'x') + "<redacted>") << kept;
    } else {
      EXPECT_EQ(out, std::string(256 - kept, 'x') + cut) << kept;  // too short to tell from text
    }
  }
  // A hex secret split at the boundary too.
  const std::string h = hex(kSecret);
  EXPECT_EQ(redact(std::string(240, '-') + h), std::string(240, '-') + "<redacted>");
}

TEST(BodyPreview, OverlappingAndAdjacentMatchesBecomeOneMarker) {
  const std::string s(kSecret);
  EXPECT_EQ(redact(s + s + "|" + s), "<redacted>|<redacted>");
}

TEST(BodyPreview, EveryResourceValueOfThePolicyIsLookedFor) {
  const Policy p = parse_policy(R"({"policy":{"allow":[{"host":"a.example"}]},
      "resources":{"one":{"accessToken":"first-token-1234"},"two":{"password":"second-pass-5678"}}})");
  EXPECT_EQ(redact_body_preview("a=first-token-1234&b=second-pass-5678&c=3", p),
            "a=<redacted>&b=<redacted>&c=3");
}

TEST(BodyPreview, HeaderNamesAreCappedAndEscaped) {
  std::vector<std::string> many(100, "x-custom");
  many[0] = "content-type";
  many[1] = std::string(300, 'a');
  many[2] = "bad\x01name";
  const std::vector<std::string> shown = shown_header_names(many);
  ASSERT_EQ(shown.size(), BodyPreview::kMaxHeaderNames);
  EXPECT_EQ(shown[0], "content-type");
  EXPECT_EQ(shown[1], std::string(BodyPreview::kMaxHeaderName, 'a'));
  EXPECT_EQ(shown[2], "bad\\x01name");
  EXPECT_EQ(shown[3], "x-custom");
}

}  // namespace
}  // namespace zn::broker
