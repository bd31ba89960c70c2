// The request side of secret handling: tripwires found raw, encoded and
// split; a request's own placeholder exempt; placeholders swapped for the
// credential encoded for where it lands.
#include "userspace/proxy/request_screen.h"

#include <gtest/gtest.h>

#include <openssl/evp.h>

namespace zn::proxy {
namespace {

const std::string kPlaceholder = "zn_ph_abcdefghijklmnopqrstuvwxyz234567";
const std::string kCanary = "AKIAZNCANARY00001";

std::string b64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  out.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                 reinterpret_cast<const unsigned char*>(in.data()),
                                                 static_cast<int>(in.size()))));
  return out;
}

void arm(RequestScreen& s) {
  EXPECT_TRUE(s.arm({{kCanary, "canary:0"}, {kPlaceholder, "placeholder:stripe"}}));
}

TEST(RequestScreen, FindsTripwiresRawAndEncoded) {
  RequestScreen s;
  arm(s);
  EXPECT_EQ(s.check("x-key: " + kCanary, {}), std::vector<std::string>{"canary:0"});
  EXPECT_EQ(s.check("Basic " + b64("user:" + kCanary), {}), std::vector<std::string>{"canary:0"});
  EXPECT_EQ(s.check("id=AKIAZNCANARY%30%30%30%301", {}), std::vector<std::string>{"canary:0"});
  EXPECT_EQ(s.check("{\"k\":\"" + kPlaceholder + "\"}", {}), std::vector<std::string>{"placeholder:stripe"});
  // Escaped byte by byte as a hostile guest may, mixed with raw bytes.
  EXPECT_EQ(s.check("id=%41KIA%5ANCANARY0000%31", {}), std::vector<std::string>{"canary:0"});
  EXPECT_EQ(s.check("{\"k\":\"\\u0041KIAZNC\\u0041NARY00001\"}", {}), std::vector<std::string>{"canary:0"});
  EXPECT_EQ(s.check("k=zn%5fph_abcdefghijklmnopqrstuvwxyz234567", {}),
            std::vector<std::string>{"placeholder:stripe"});
  // Positive control: near misses are not tripwires.
  EXPECT_TRUE(s.check("x-key: AKIAZNCANARY00002", {}).empty());
  EXPECT_TRUE(s.check("zn_ph_abcdefghijklmnopqrstuvwxyz23456", {}).empty());
}

TEST(RequestScreen, ARequestsOwnPlaceholderIsExempt) {
  RequestScreen s;
  arm(s);
  const std::vector<Substitution> own = {{kPlaceholder, "sk_live_x", "placeholder:stripe"}};
  EXPECT_TRUE(s.check("k=" + kPlaceholder, own).empty());
  EXPECT_EQ(s.check("k=" + kPlaceholder + "&c=" + kCanary, own), std::vector<std::string>{"canary:0"});
}

TEST(RequestScreen, FindsATripwireSplitAcrossPieces) {
  RequestScreen s;
  arm(s);
  SecretScrubber::Stream stream(s.scrubber());
  std::string out;
  const std::string body = "aaaa" + kCanary + "bbbb";
  for (char c : body) {
    stream.feed(std::string_view(&c, 1), out);
    // Never a whole tripwire in what may be sent on.
    EXPECT_EQ(out.find(kCanary), std::string::npos);
  }
  stream.finish(out);
  EXPECT_EQ(s.hits(stream.report(), {}), std::vector<std::string>{"canary:0"});
}

// A streamed body: a tripwire escaped byte by byte and split across pieces is
// found before any of its bytes are released; a clean body comes out whole.
TEST(RequestScreen, AStreamedBodyKeepsBackWhatCouldStillBeATripwire) {
  RequestScreen s;
  arm(s);
  // (what comes before the tripwire in the piece, the tripwire spelled)
  for (const auto& [before, spelled] : std::vector<std::pair<std::string, std::string>>{
           {"", "%41KIA%5ANCANARY0000%31"},
           {"", "\\u0041KIAZNCANARY0000\\u0031"},
           {"", kCanary},
           {"k=", "zn%5fph_abcdefghijklmnopqrstuvwxyz234567"},
           {"", "&#65;KIAZNCANARY0000&#x31;"},
           {"=\r\n", "=41KIAZNCANARY0000=\r\n1"},
       }) {
    SCOPED_TRACE(spelled);
    StreamScreen stream(s, {});
    const std::string body = std::string(5000, 'a') + before + spelled + std::string(100, 'b');
    std::string out;
    std::vector<std::string> hits;
    for (char c : body) {
      hits = stream.feed(std::string_view(&c, 1), out);
      if (!hits.empty()) break;
    }
    if (hits.empty()) hits = stream.finish(out);
    EXPECT_FALSE(hits.empty());
    // Nothing of the tripwire went: at most what came before it.
    EXPECT_LE(out.size(), 5000 + before.size());
    EXPECT_EQ(out, body.substr(0, out.size()));
  }
  // Positive control: the same shape without a tripwire, all of it, in order.
  StreamScreen stream(s, {});
  const std::string body = std::string(5000, 'a') + "%41KIA%5ANCANARY0000%32\\u0041" + std::string(100, 'b');
  std::string out;
  for (size_t i = 0; i < body.size(); i += 7)
    EXPECT_TRUE(stream.feed(std::string_view(body).substr(i, 7), out).empty());
  EXPECT_TRUE(stream.finish(out).empty());
  EXPECT_EQ(out, body);
}

TEST(RequestScreen, SwapsPlaceholdersEncodedForWhereTheyLand) {
  const std::vector<Substitution> subs = {{kPlaceholder, "sk \"live\"&x=1", "placeholder:stripe"}};
  std::string header = "Bearer " + kPlaceholder;
  EXPECT_EQ(swap_placeholders(header, subs, BodyKind::kOther), 1u);
  EXPECT_EQ(header, "Bearer sk \"live\"&x=1");
  std::string json = "{\"a\":\"" + kPlaceholder + "\",\"b\":\"" + kPlaceholder + "\"}";
  EXPECT_EQ(swap_placeholders(json, subs, BodyKind::kJson), 2u);
  EXPECT_EQ(json, "{\"a\":\"sk \\\"live\\\"&x=1\",\"b\":\"sk \\\"live\\\"&x=1\"}");
  std::string form = "k=" + kPlaceholder + "&n=1";
  EXPECT_EQ(swap_placeholders(form, subs, BodyKind::kForm), 1u);
  EXPECT_EQ(form, "k=sk%20%22live%22%26x%3D1&n=1");
  std::string query = "api_key=" + kPlaceholder;
  EXPECT_EQ(swap_placeholders_in_query(query, subs), 1u);
  EXPECT_EQ(query, "api_key=sk%20%22live%22%26x%3D1");
  std::string none = "nothing here";
  EXPECT_EQ(swap_placeholders(none, subs, BodyKind::kJson), 0u);
  EXPECT_EQ(none, "nothing here");
}

TEST(RequestScreen, BodyKindsFromContentType) {
  auto kind = [](const std::string& type) {
    http::RequestHead h;
    if (!type.empty()) h.headers.push_back({"Content-Type", type});
    return body_kind(h);
  };
  EXPECT_EQ(kind("application/json"), BodyKind::kJson);
  EXPECT_EQ(kind("Application/JSON; charset=utf-8"), BodyKind::kJson);
  EXPECT_EQ(kind("application/vnd.api+json"), BodyKind::kJson);
  EXPECT_EQ(kind("application/x-www-form-urlencoded"), BodyKind::kForm);
  EXPECT_EQ(kind("text/plain"), BodyKind::kOther);
  EXPECT_EQ(kind("multipart/form-data; boundary=x"), BodyKind::kOther);
  EXPECT_EQ(kind(""), BodyKind::kOther);
}

}  // namespace
}  // namespace zn::proxy
