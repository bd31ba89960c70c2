// The reflected-secret scrubber on its own: each encoding as real encoders
// write it (the expected strings below come from Python's json, urllib,
// html and base64 modules, PHP and Go, not from the code under test),
// matches split at every byte position across feeds, overlapping and
// self-overlapping patterns, several secrets, near-misses left alone,
// same-length output, hold-back and flush.
#include "userspace/proxy/secret_scrubber.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <utility>
#include <vector>
#include <thread>
#include <random>

namespace zn::proxy {
namespace {

// Every special class at once: '/', '+', quotes, space, non-ASCII, HTML
// metacharacters, '~' (kept by RFC 3986, encoded by PHP).
const std::string kSecret = "sk_live/Zq+\"x\" \xc3\xa9<&>'~ 9";

struct Reflection {
  const char* how;
  std::string text;  // contains the secret in that encoding
};

std::vector<Reflection> reflections() {
  return {
      {"raw", "Authorization: Bearer " + kSecret + "\r\n"},
      {"json (Python json.dumps)", R"({"Authorization": "Bearer sk_live/Zq+\"x\" \u00e9<&>'~ 9"})"},
      {"json ensure_ascii=False / JS", "{\"a\":\"sk_live/Zq+\\\"x\\\" \xc3\xa9<&>'~ 9\"}"},
      {"json (PHP json_encode)", R"({"a":"Bearer sk_live\/Zq+\"x\" \u00e9<&>'~ 9"})"},
      {"json (PHP, upper hex)", R"({"a":"Bearer sk_live\/Zq+\"x\" \u00E9<&>'~ 9"})"},
      {"json (Go encoding/json)", "{\"a\":\"sk_live/Zq+\\\"x\\\" \xc3\xa9\\u003c\\u0026\\u003e'~ 9\"}"},
      {"url (Python quote safe='')", "/cb?t=sk_live%2FZq%2B%22x%22%20%C3%A9%3C%26%3E%27~%209&x=1"},
      {"url (quote_plus / form)", "t=sk_live%2FZq%2B%22x%22+%C3%A9%3C%26%3E%27~+9"},
      {"url (PHP urlencode)", "Location: /x?t=sk_live%2FZq%2B%22x%22+%C3%A9%3C%26%3E%27%7E+9"},
      {"url (lower hex)", "t=sk_live%2fZq%2b%22x%22%20%c3%a9%3c%26%3e%27~%209"},
      {"html (Python html.escape)", "<pre>sk_live/Zq+&quot;x&quot; \xc3\xa9&lt;&amp;&gt;&#x27;~ 9</pre>"},
      {"html (Go html.EscapeString)", "<p>sk_live/Zq+&#34;x&#34; \xc3\xa9&lt;&amp;&gt;&#39;~ 9</p>"},
      {"html (PHP htmlspecialchars)", "<p>sk_live/Zq+&quot;x&quot; \xc3\xa9&lt;&amp;&gt;&#039;~ 9</p>"},
      // Basic auth blobs: "user:", "u:", "ab:" put the secret at the three
      // alignments of a base64 group; "x" + secret is a fourth, padded one.
      {"base64 user:", "Basic dXNlcjpza19saXZlL1pxKyJ4IiDDqTwmPid+IDk="},
      {"base64 u:", "Basic dTpza19saXZlL1pxKyJ4IiDDqTwmPid+IDk="},
      {"base64 ab:", "Basic YWI6c2tfbGl2ZS9acSsieCIgw6k8Jj4nfiA5"},
      {"base64 padded", "eHNrX2xpdmUvWnErIngiIMOpPCY+J34gOQ=="},
      {"base64url user:", "dXNlcjpza19saXZlL1pxKyJ4IiDDqTwmPid-IDk"},
      {"base64url x", "eHNrX2xpdmUvWnErIngiIMOpPCY-J34gOQ"},
      // bytes.hex() / hexdigest-style dumps of the header value.
      {"hex", "42656172657220736b5f6c6976652f5a712b22782220c3a93c263e277e2039"},
      {"HEX", "0x736B5F6C6976652F5A712B22782220C3A93C263E277E2039"},
  };
}

// Bytes of the secret that would survive in each encoding: what the guest
// must never see. For base64 the longest run that is the secret's own
// (independent of its neighbours).
std::vector<std::string> forbidden() {
  std::vector<std::string> out;
  for (const SecretPattern& p : secret_patterns(kSecret)) out.push_back(p.bytes);
  return out;
}

std::string scrub_in_pieces(const SecretScrubber& s, const std::string& in, const std::vector<size_t>& cuts,
                            ScrubReport* report = nullptr) {
  SecretScrubber::Stream stream(s);
  std::string out;
  size_t from = 0;
  for (size_t cut : cuts) {
    stream.feed(std::string_view(in).substr(from, cut - from), out);
    // At most a partial match spelled at its longest (an escape per byte,
    // line breaks between) and an escape not yet complete.
    EXPECT_LE(stream.held(), 24 * s.longest());
    from = cut;
  }
  stream.feed(std::string_view(in).substr(from), out);
  stream.finish(out);
  if (report) *report = stream.report();
  return out;
}

TEST(SecretScrubber, EveryEncodingAsRealEncodersWriteItIsReplacedAtTheSameLength) {
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret(kSecret, "cap:stripe"));
  for (const Reflection& r : reflections()) {
    std::string out = r.text;
    ScrubReport rep = s.scrub(out);
    EXPECT_EQ(out.size(), r.text.size()) << r.how;
    EXPECT_GE(rep.matches, 1u) << r.how;
    EXPECT_NE(out.find("zn-redacted"), std::string::npos) << r.how << ": " << out;
    EXPECT_EQ(out.find(kSecret), std::string::npos) << r.how;
    for (const std::string& f : forbidden())
      EXPECT_EQ(out.find(f), std::string::npos) << r.how << ": " << out;
    // What is left of the blob around the match is untouched.
    EXPECT_EQ(out.substr(0, 2), r.text.substr(0, 2)) << r.how;
  }
}

TEST(SecretScrubber, ReportNamesTheEncodingNeverTheValue) {
  SecretScrubber s;
  s.add_secret(kSecret, "cap:stripe");
  std::string a = "x " + kSecret + " y";
  EXPECT_EQ(s.scrub(a).encoding_names(), std::vector<std::string>{"raw"});
  std::string b = "Basic dXNlcjpza19saXZlL1pxKyJ4IiDDqTwmPid+IDk=";
  EXPECT_EQ(s.scrub(b).encoding_names(), std::vector<std::string>{"base64"});
  std::string c = "t=sk_live%2FZq%2B%22x%22%20%C3%A9%3C%26%3E%27~%209";
  EXPECT_EQ(s.scrub(c).encoding_names(), std::vector<std::string>{"url"});
  std::string d = R"("sk_live/Zq+\"x\" \u00e9<&>'~ 9")";
  EXPECT_EQ(s.scrub(d).encoding_names(), std::vector<std::string>{"json"});
  std::string e = "sk_live/Zq+&quot;x&quot; \xc3\xa9&lt;&amp;&gt;&#x27;~ 9";
  EXPECT_EQ(s.scrub(e).encoding_names(), std::vector<std::string>{"html"});
  std::string f = "736b5f6c6976652f5a712b22782220c3a93c263e277e2039";
  EXPECT_EQ(s.scrub(f).encoding_names(), std::vector<std::string>{"hex"});
}

TEST(SecretScrubber, MatchesSplitAtEveryPositionAcrossTwoAndThreeFeedsAreCaught) {
  SecretScrubber s;
  s.add_secret(kSecret, "cap:stripe");
  std::string body;
  for (const Reflection& r : reflections()) body += r.text + "\n";
  const std::string whole = scrub_in_pieces(s, body, {});
  ASSERT_EQ(whole.size(), body.size());
  for (const std::string& f : forbidden()) ASSERT_EQ(whole.find(f), std::string::npos) << f;
  // Two feeds: every cut. Three feeds: every pair of cuts around one
  // reflection (the whole body squared would be slow for nothing).
  for (size_t i = 0; i <= body.size(); ++i) ASSERT_EQ(scrub_in_pieces(s, body, {i}), whole) << "cut at " << i;
  const std::string one = "<<" + reflections()[0].text + reflections()[13].text + ">>";
  const std::string one_whole = scrub_in_pieces(s, one, {});
  for (size_t i = 0; i <= one.size(); ++i)
    for (size_t j = i; j <= one.size(); ++j)
      ASSERT_EQ(scrub_in_pieces(s, one, {i, j}), one_whole) << i << "," << j;
  // Byte by byte.
  std::vector<size_t> every;
  for (size_t i = 1; i < body.size(); ++i) every.push_back(i);
  EXPECT_EQ(scrub_in_pieces(s, body, every), whole);
}

TEST(SecretScrubber, NearMissesAreLeftAlone) {
  SecretScrubber s;
  s.add_secret("sk_live_zerod_test_4f9a8b7c6d", "cap:stripe");
  const std::vector<std::string> near = {
      "sk_live_zerod_test_4f9a8b7c6",          // truncated (at the very end: held back, then flushed as is)
      "sk_live_zerod_test_4f9a8b7c6X",         // last byte differs
      "Xk_live_zerod_test_4f9a8b7c6d",         // first byte differs
      "SK_LIVE_ZEROD_TEST_4F9A8B7C6D",         // case changed
      "sk_live_zerod_test_4f9a8b7c6 d",        // split by a space
      "c2tfbGl2ZV96ZXJvZF90ZXN0XzRmOWE4Yjdj",  // base64 of the secret's first 27 bytes only
  };
  for (size_t i = 0; i < near.size(); ++i) {
    std::string out = near[i];
    ScrubReport rep = s.scrub(out);
    EXPECT_EQ(out, near[i]);
    EXPECT_EQ(rep.matches, 0u) << near[i];
  }
  // Positive control: the exact secret in the same place is replaced.
  std::string exact = "sk_live_zerod_test_4f9a8b7c6d";
  EXPECT_EQ(s.scrub(exact).matches, 1u);
  EXPECT_EQ(exact, "zn-redacted-zn-redacted-zn-re");
}

TEST(SecretScrubber, OverlappingAndSelfOverlappingPatternsAreAllCovered) {
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret("abcdefgh12", "one"));
  ASSERT_TRUE(s.add_secret("efgh12ijkl", "two"));
  ASSERT_TRUE(s.add_secret("aaaaaaaa", "three"));
  std::string t = "[abcdefgh12ijkl]";
  ScrubReport rep = s.scrub(t);
  // One run, one marker, whichever secret each byte belonged to.
  EXPECT_EQ(t, "[zn-redacted-zn]");
  EXPECT_EQ(rep.secrets, 3u);  // both secrets, bits 0 and 1
  std::string a = "<aaaaaaaaaaaaa>";
  EXPECT_EQ(s.scrub(a).secrets, 4u);
  EXPECT_EQ(a, "<zn-redacted-z>");
  // Split anywhere, the same.
  for (size_t i = 0; i <= a.size(); ++i) {
    SecretScrubber::Stream st(s);
    std::string out;
    st.feed(std::string_view("<aaaaaaaaaaaaa>").substr(0, i), out);
    st.feed(std::string_view("<aaaaaaaaaaaaa>").substr(i), out);
    st.finish(out);
    EXPECT_EQ(out, "<zn-redacted-z>") << i;
  }
}

TEST(SecretScrubber, SeveralSecretsInOneAutomatonEachReported) {
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret("first-secret-value", "cap:a"));
  ASSERT_TRUE(s.add_secret("second_secret_value", "cap:b"));
  ASSERT_TRUE(s.add_secret("first-secret-value", "cap:a"));  // already there
  EXPECT_EQ(s.secret_count(), 2u);
  std::string only_b = "x second_secret_value y";
  EXPECT_EQ(s.scrub(only_b).secrets, 2u);
  std::string both = "first-secret-value second_secret_value";
  ScrubReport rep = s.scrub(both);
  EXPECT_EQ(rep.matches, 2u);
  EXPECT_EQ(rep.secrets, 3u);
  EXPECT_EQ(both.find("secret"), std::string::npos) << both;
  EXPECT_EQ(s.label(1), "cap:b");
}

TEST(SecretScrubber, HoldsBackOnlyAPartialMatchAndFlushesItAtTheEnd) {
  SecretScrubber s;
  s.add_secret("sk_live_zerod_test_4f9a8b7c6d", "cap:stripe");
  SecretScrubber::Stream stream(s);
  std::string out;
  // Nothing that could start a match: everything goes out at once (no
  // latency added to a streamed response).
  stream.feed("hello world, nothing here. ", out);
  EXPECT_EQ(out, "hello world, nothing here. ");
  EXPECT_EQ(stream.held(), 0u);
  stream.feed("tail sk_live_zer", out);
  EXPECT_EQ(stream.held(), std::string("sk_live_zer").size());
  EXPECT_EQ(out, "hello world, nothing here. tail ");
  stream.finish(out);
  EXPECT_EQ(out, "hello world, nothing here. tail sk_live_zer");
  EXPECT_EQ(stream.report().matches, 0u);
}

TEST(SecretScrubber, RandomBodiesWithSecretsAtRandomCutsComeOutSameLengthAndClean) {
  SecretScrubber s;
  s.add_secret(kSecret, "cap:stripe");
  std::mt19937 rng(9);
  const auto refl = reflections();
  for (int round = 0; round < 300; ++round) {
    std::string body;
    for (int k = 0; k < 6; ++k) {
      const size_t filler = rng() % 40;
      for (size_t i = 0; i < filler; ++i) body.push_back(static_cast<char>(rng() % 256));
      body += refl[rng() % refl.size()].text;
    }
    std::vector<size_t> cuts;
    for (size_t c = rng() % 7; c < body.size(); c += 1 + rng() % 50) cuts.push_back(c);
    const std::string out = scrub_in_pieces(s, body, cuts);
    ASSERT_EQ(out.size(), body.size());
    for (const std::string& f : forbidden()) ASSERT_EQ(out.find(f), std::string::npos) << round;
  }
}

TEST(SecretScrubber, ShortSecretsAreScrubbedRawOnlyAndEmptyOnesRefused) {
  SecretScrubber s;
  EXPECT_FALSE(s.add_secret("", "x"));
  EXPECT_FALSE(s.armed());
  ASSERT_TRUE(s.add_secret("pw12", "cap:short"));
  EXPECT_EQ(s.patterns(), 1u);
  std::string t = "a pw12 b cHcxMg== c";  // base64 of pw12 is left: too short to tell from text
  s.scrub(t);
  EXPECT_EQ(t, "a zn-r b cHcxMg== c");
}

TEST(SecretScrubber, SecretsTooLongOrTooManyAreRefusedAndTheRestStillWorks) {
  SecretScrubber s;
  EXPECT_FALSE(s.add_secret(std::string(SecretScrubber::kMaxSecretBytes + 1, 'a'), "huge"));
  // Every byte non-ASCII and JSON/URL/HTML-special: the encodings explode.
  std::string wide;
  while (wide.size() + 4 <= SecretScrubber::kMaxSecretBytes) wide += "\xf0\x9f\x98\x80";
  ASSERT_TRUE(s.add_secret("a-normal-secret-123", "ok"));
  EXPECT_FALSE(s.add_secret(wide, "wide"));  // its escaped forms would not fit the table bound
  EXPECT_EQ(s.secret_count(), 1u);
  // A 2 KiB JWT-like token fits.
  std::string jwt;
  for (int i = 0; jwt.size() < 2048; ++i) jwt += "eyJhbGciOiJSUzI1NiJ9." + std::to_string(i);
  SecretScrubber big;
  EXPECT_TRUE(big.add_secret(jwt, "jwt"));
  std::string t = "x a-normal-secret-123 y";
  EXPECT_EQ(s.scrub(t).matches, 1u);
  for (size_t i = s.secret_count(); i < SecretScrubber::kMaxSecrets; ++i)
    ASSERT_TRUE(s.add_secret("another-secret-" + std::to_string(i) + "-x", "n")) << i;
  EXPECT_FALSE(s.add_secret("one-too-many-secret", "n"));
  std::string u = "another-secret-40-x a-normal-secret-123";
  EXPECT_EQ(s.scrub(u).matches, 2u);
}

TEST(SecretScrubber, UnarmedPassesThroughAndClearForgets) {
  SecretScrubber s;
  std::string t = "sk_live_zerod_test_4f9a8b7c6d";
  EXPECT_EQ(s.scrub(t).matches, 0u);
  EXPECT_EQ(t, "sk_live_zerod_test_4f9a8b7c6d");
  s.add_secret("sk_live_zerod_test_4f9a8b7c6d", "cap:stripe");
  EXPECT_GT(s.states(), 29u);
  s.clear();
  EXPECT_FALSE(s.armed());
  EXPECT_EQ(s.states(), 0u);
  EXPECT_EQ(s.scrub(t).matches, 0u);
}

TEST(SecretScrubber, PatternsAreTheSecretsOwnBytesInEachEncodingDeduplicated) {
  // An alphanumeric token: URL and JSON encodings equal the raw one.
  const auto p = secret_patterns("sk_live_zerod_test_4f9a8b7c6d");
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(p[0].bytes, "sk_live_zerod_test_4f9a8b7c6d");
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = i + 1; j < p.size(); ++j) EXPECT_NE(p[i].bytes, p[j].bytes);
  size_t b64 = 0;
  for (const auto& x : p)
    b64 += x.encoding == SecretEncoding::kBase64 || x.encoding == SecretEncoding::kBase64Url;
  EXPECT_GE(b64, 3u);  // three alignments
  EXPECT_LE(p.size(), 10u);
}

TEST(SecretScrubber, OneListIsBuiltOnceAndSharedAndOutlivesAnyOneHolder) {
  const std::string a = "sk_live_shared_automaton_1a2b3c";
  const std::string b = "ghp_shared_automaton_second_9z8y";
  auto first = std::make_unique<SecretScrubber>();
  SecretScrubber second, other_label, other_order;
  ASSERT_TRUE(first->add_secret(a, "cap:a") && first->add_secret(b, "cap:b"));
  ASSERT_TRUE(second.add_secret(a, "cap:a") && second.add_secret(b, "cap:b"));
  EXPECT_TRUE(second.shares_automaton_with(*first));
  // Another label or order is another automaton (labels are reported by
  // position).
  ASSERT_TRUE(other_label.add_secret(a, "cap:x") && other_label.add_secret(b, "cap:b"));
  ASSERT_TRUE(other_order.add_secret(b, "cap:b") && other_order.add_secret(a, "cap:a"));
  EXPECT_FALSE(other_label.shares_automaton_with(*first));
  EXPECT_FALSE(other_order.shares_automaton_with(*first));
  // A stream keeps the automaton it was made with: the scrubber that made
  // it cleared and gone, it still finds both secrets.
  SecretScrubber::Stream stream(*first);
  first.reset();
  std::string out;
  stream.feed("x=" + a + "&y=" + b, out);
  stream.finish(out);
  EXPECT_EQ(stream.report().matches, 2u);
  EXPECT_EQ(out.find(a), std::string::npos);
  EXPECT_EQ(out.find(b), std::string::npos);
  // The other holder is unaffected; a secret added to it makes a list of
  // its own, and the first list's other holders keep theirs.
  std::string t = "echo " + a;
  EXPECT_EQ(second.scrub(t).matches, 1u);
  SecretScrubber third;
  ASSERT_TRUE(third.add_secret(a, "cap:a") && third.add_secret(b, "cap:b"));
  EXPECT_TRUE(third.shares_automaton_with(second));
  ASSERT_TRUE(third.add_secret("tok_third_only_secret_77", "cap:c"));
  EXPECT_FALSE(third.shares_automaton_with(second));
  std::string u = "tok_third_only_secret_77";
  EXPECT_EQ(second.scrub(u).matches, 0u);  // positive control below
  EXPECT_EQ(third.scrub(u).matches, 1u);
}

TEST(SecretScrubber, SecretsAddedTogetherAreTheListAddedOneByOne) {
  const std::string a = "sk_live_together_automaton_1a2b", b = "ghp_together_automaton_9z8y7x";
  SecretScrubber together, one_by_one;
  EXPECT_TRUE(together.add_secrets({{a, "cap:a"}, {b, "cap:b"}, {a, "cap:a"}}));
  ASSERT_TRUE(one_by_one.add_secret(a, "cap:a") && one_by_one.add_secret(b, "cap:b"));
  EXPECT_TRUE(together.shares_automaton_with(one_by_one));
  EXPECT_EQ(together.secret_count(), 2u);
  // An empty or oversized one is refused, the others taken.
  SecretScrubber some;
  EXPECT_FALSE(some.add_secrets({{"", "cap:empty"}, {a, "cap:a"}, {std::string(5000, 'x'), "cap:big"}}));
  EXPECT_EQ(some.secret_count(), 1u);
  std::string t = "echo " + a;
  EXPECT_EQ(some.scrub(t).matches, 1u);
  // Nothing new: the automaton stays.
  EXPECT_TRUE(together.add_secrets({{b, "cap:b"}}));
  EXPECT_TRUE(together.shares_automaton_with(one_by_one));
}

// An escape that ends in the byte it decodes to ("%31" is "1") followed by
// the secret's other bytes: the as-sent view finds "1abc..." from the
// escape's last byte, a canonical view from its first. The canonical views'
// skipping ahead (same state as the as-sent view inside a plain run) must
// not start before the state's prefix lies in the run, or the escape's
// first bytes would stay unredacted.
TEST(SecretScrubber, AnEscapeEndingInTheByteItDecodesToIsRedactedWhole) {
  const std::string secret = "1abcdefghijk";
  SecretScrubber s;
  ASSERT_TRUE(s.add_secret(secret, "cap:x"));
  for (const std::string esc : {"%31", "\\x31", "\\u0031", "=31", "%30", "&#x31;"}) {
    SCOPED_TRACE(esc);
    const std::string value = (esc == "%30" ? esc + "1" : esc) + secret.substr(1);
    const std::string body = "v=" + value + ";";
    std::string out = body;
    EXPECT_GE(s.scrub(out).matches, 1u);
    if (esc == "%30") {
      EXPECT_EQ(out.substr(0, 5), body.substr(0, 5));  // "%30" is "0": not the secret's first byte
      EXPECT_EQ(out.find(secret), std::string::npos);
      continue;
    }
    std::string marker;
    while (marker.size() < value.size()) marker += SecretScrubber::kMarker;
    EXPECT_EQ(out, "v=" + marker.substr(0, value.size()) + ";");
    // Positive control: one byte of the rest changed, nothing is touched.
    std::string miss = "v=" + esc + "abcdefghijX;";
    const std::string before = miss;
    EXPECT_EQ(s.scrub(miss).matches, 0u);
    EXPECT_EQ(miss, before);
  }
}

// The automaton cache is shared by every proxy loop: threads arming the same
// lists at once (and dropping them) each get a working scrubber, and those
// holding one list at one time hold one automaton (run under TSan too).
// A list armed again after its last holder went is found warm, not built
// again; forget_warm() lets it go (positive control: armed again, built
// again); more lists than kWarmAutomata push out the oldest.
TEST(SecretScrubber, AListArmedAgainSoonAfterItsHoldersWentIsNotRebuilt) {
  SecretScrubber::forget_warm();
  const std::string secret = "sk_live_warm_automaton_5f6e7d";
  auto arm = [&](const std::string& s) {
    SecretScrubber scrubber;
    EXPECT_TRUE(scrubber.add_secret(s, "cap:warm"));
    std::string text = "Bearer " + s;
    EXPECT_EQ(scrubber.scrub(text).matches, 1u);
  };
  const uint64_t before = SecretScrubber::automata_built();
  arm(secret);  // built; its scrubber gone at once
  EXPECT_EQ(SecretScrubber::automata_built(), before + 1);
  arm(secret);  // the next connection: warm
  arm(secret);
  EXPECT_EQ(SecretScrubber::automata_built(), before + 1);
  SecretScrubber::forget_warm();
  arm(secret);
  EXPECT_EQ(SecretScrubber::automata_built(), before + 2);
  // kWarmAutomata other lists armed since: the first is no longer warm.
  for (size_t i = 0; i < SecretScrubber::kWarmAutomata; ++i) arm(secret + "_other_" + std::to_string(i));
  const uint64_t after_others = SecretScrubber::automata_built();
  EXPECT_EQ(after_others, before + 2 + SecretScrubber::kWarmAutomata);
  arm(secret);
  EXPECT_EQ(SecretScrubber::automata_built(), after_others + 1);
  SecretScrubber::forget_warm();
}

TEST(SecretScrubberConcurrency, LoopsArmingTheSameListsAtOnceShareAndScrub) {
  const std::vector<std::string> lists[2] = {
      {"sk_live_concurrent_list_one_1a2b"},
      {"sk_live_concurrent_list_one_1a2b", "ghp_concurrent_second_9z8y7x"}};
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::unique_ptr<SecretScrubber>> kept(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const std::vector<std::string>& list = lists[(t + r) % 2];
        auto s = std::make_unique<SecretScrubber>();
        std::vector<std::pair<std::string_view, std::string_view>> items;
        for (const std::string& secret : list) items.emplace_back(secret, "cap:x");
        if (!s->add_secrets(items)) failures++;
        std::string body = "echo " + list.back();
        if (s->scrub(body).matches != 1) failures++;
        if (r == kRounds - 1 && (t % 2) == 1) kept[t] = std::move(s);  // the last round's, all on list 0
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Threads 1 and 3 ended on the same list (index (t + kRounds - 1) % 2 == 0).
  ASSERT_TRUE(kept[1] && kept[3]);
  EXPECT_TRUE(kept[1]->shares_automaton_with(*kept[3]));
}

}  // namespace
}  // namespace zn::proxy
