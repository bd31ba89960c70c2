// Secret reflection, end to end (issue 9, class 1): with an identity
// injected, hostile upstreams (tests/support/echo_upstream.py /reflect/*)
// hand the request headers back raw, JSON-, HTML-, URL- and base64-encoded,
// in the reason phrase, Location, Set-Cookie and custom headers, dribbled a
// few bytes per TLS record across chunk boundaries, with Content-Length,
// chunked and close-delimited framing, and gzip-compressed against the
// request's wishes. Real curl in the guest, over IPv4 and IPv6: the guest's
// bytes never hold the secret in any encoding, the marker is there, the
// framing is intact, and the audit records secret:reflected without the
// value. Positive control each time: the upstream's log shows the secret did
// arrive there (so the echo had something to reflect).
//
//   api.stripe.com   198.18.0.11 and 2001:db8:18::11, identity cap:stripe (kSecret)
//   odd.reflect.test 2001:db8:18::13 only, identity cap:odd for /v1/**
//                    (kOdd: quotes, '/', '+', '<&>', spaces: every encoding
//                    differs from the raw bytes), no identity for /reflect/**
#include <openssl/evp.h>

#include <map>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

const std::string kOdd = "zn/Odd+tok \"q\" <&>'~ 42";

std::string base64(const std::string& in, bool url) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(n);
  if (url)
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return out;
}

// The forms of `secret` that would hand it back: raw, hex, and for each base64
// alignment (as in Basic "user:secret") the characters that depend on the
// secret's bytes alone, in both alphabets. Computed with OpenSSL, not with
// the code under test.
std::vector<std::string> leaked_forms(const std::string& secret) {
  std::vector<std::string> out = {secret};
  for (const std::string prefix : {"", "u:", "ab:"}) {
    for (bool url : {false, true}) {
      const std::string enc = base64(prefix + secret, url);
      const size_t first = (8 * prefix.size() + 5) / 6, end = 8 * (prefix.size() + secret.size()) / 6;
      out.push_back(enc.substr(first, end - first));
    }
  }
  std::string hex;
  for (unsigned char c : secret) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
  out.push_back(hex);
  return out;
}

// kOdd as Python's json, html and urllib write it (echo_upstream.py).
std::vector<std::string> odd_forms() {
  std::vector<std::string> out = leaked_forms(kOdd);
  for (const char* f :
       {R"(zn/Odd+tok \"q\" <&>'~ 42)", R"(zn\/Odd+tok \"q\" <&>'~ 42)",
        "zn/Odd+tok &quot;q&quot; &lt;&amp;&gt;&#x27;~ 42", "zn%2FOdd%2Btok%20%22q%22%20%3C%26%3E%27~%2042",
        "zn%2fOdd%2btok%20%22q%22%20%3c%26%3e%27~%2042", "zn%2FOdd%2Btok+%22q%22+%3C%26%3E%27~+42"})
    out.push_back(f);
  return out;
}

// Independent readers of what the guest got (not the code under test):
// percent-decoded, with CR/LF dropped, with NULs dropped, quoted-printable
// decoded.
std::string percent_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}
std::string without(std::string s, const std::string& chars) {
  std::erase_if(s, [&](char c) { return chars.find(c) != std::string::npos; });
  return s;
}
std::string qp_decoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "=\r\n") == 0) {
      i += 2;
    } else if (s[i] == '=' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1]))) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

struct Fetched {
  int exit_code = -1;
  int status = 0;
  size_t body_size = 0;
  std::string head, body, all;
};

struct Variant {
  std::string path;
  bool head_request = false;
  int status = 200;
  bool in_head = false, in_body = false;  // where the secret comes back
};

// Every hostile variant of echo_upstream.py, GET and HEAD.
const std::vector<Variant> kVariants = {
    {"/reflect/cl", false, 200, false, true},        {"/reflect/chunked", false, 200, false, true},
    {"/reflect/close", false, 200, false, true},     {"/reflect/headers", false, 302, true, true},
    {"/reflect/html", false, 400, false, true},      {"/reflect/empty/204", false, 204, true, false},
    {"/reflect/empty/304", false, 304, true, false}, {"/reflect/headers", true, 302, true, false},
};

class ReflectionTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    const std::string h = "odd.reflect.test";
    issue_upstream_cert(h);
    config["dns_static"]["api.stripe.com"] = {"198.18.0.11", "2001:db8:18::11"};
    config["dns_static"][h] = {"2001:db8:18::13"};
  }

  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    echo("2001:db8:18::11", 443, "api.stripe.com");
    echo("2001:db8:18::13", 443, "odd.reflect.test");
    for (const char* target : {"2001:db8:18::11 443", "2001:db8:18::13 443"})
      ASSERT_TRUE(inet_accepts(target)) << target << " never accepted";
    // The fixture's policy plus a host whose secret differs in every
    // encoding; the first rule injects, the second does not.
    json pol = json::parse(policy());
    pol["policy"]["allow"].push_back(
        {{"host", "odd.reflect.test"}, {"paths", {"/v1/**"}}, {"identity", "cap:odd"}});
    pol["policy"]["allow"].push_back({{"host", "odd.reflect.test"}, {"paths", {"/reflect/**"}}});
    pol["resources"]["odd"] = {{"accessToken", kOdd}};
    json r = call("session.update", {{"id", "user-1"}, {"policy", pol.dump()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }

  // One request from the guest's curl: head and body as received.
  Fetched fetch(const std::string& url, bool head_request, const std::string& extra = "") {
    const std::string tag = std::to_string(fetches_++);
    const std::string hf = (dir_ / ("h" + tag)).string(), bf = (dir_ / ("b" + tag)).string();
    auto r = guest("curl -s -m 15 --http1.1 --cacert " + p("guest-trust.pem") + " " + extra +
                   (head_request ? " -I" : "") + " -D " + hf + " -o " + bf +
                   " -w '%{http_code} %{size_download}' '" + url + "'");
    Fetched f;
    f.exit_code = r.exit_code;
    std::sscanf(r.output.c_str(), "%d %zu", &f.status, &f.body_size);
    f.head = slurp(hf);
    f.body = slurp(bf);
    f.all = f.head + f.body + r.output;
    return f;
  }

  std::string audit(const std::string& category) {
    broker::AuditStore store((dir_ / "state" / "audit.db").string(), broker::AuditStore::Mode::kReadOnly);
    std::string out;
    broker::AuditQuery q;
    if (!category.empty()) q.event = category;
    for (const auto& r : store.query(q)) out += r.event + " " + r.detail.dump() + "\n";
    return out;
  }

  // Lines of the upstream log for `target` that carried `secret` (the
  // positive control: the echo had it to reflect).
  size_t arrived(const std::string& target, const std::string& secret) {
    size_t n = 0;
    std::istringstream log(upstream_log());
    const std::string want_target = "\"target\": \"" + target + "\"";
    const std::string want_auth = json(secret).dump();  // as json.dumps escapes it
    for (std::string line; std::getline(log, line);)
      if (line.find(want_target) != std::string::npos &&
          line.find(want_auth.substr(1, want_auth.size() - 2)) != std::string::npos)
        ++n;
    return n;
  }

  void expect_clean(const Fetched& f, const std::vector<std::string>& forms, const std::string& what) {
    for (const std::string& form : forms)
      EXPECT_EQ(f.all.find(form), std::string::npos) << what << ": leaked \"" << form << "\"\n" << f.all;
  }

  // Audit events are written once the response is relayed: the guest may be
  // done first.
  std::string wait_audit(const std::string& category, const std::string& needle) {
    std::string events;
    for (int i = 0; i < 50; ++i) {
      if (i > 0) std::this_thread::sleep_for(100ms);
      events = audit(category);
      if (events.find(needle) != std::string::npos) break;
    }
    return events;
  }

  // The audit holds a secret:reflected for `path` naming the identity and
  // exactly where it was found, and no event anywhere holds the value.
  void expect_audited(const std::string& path, const Variant& v, const std::string& identity,
                      const std::vector<std::string>& forms) {
    std::string where = "\"where\":[";
    if (v.in_head) where += "\"header\"";
    if (v.in_head && v.in_body) where += ",";
    if (v.in_body) where += "\"body\"";
    where += "]";
    std::string events;
    bool found = false;
    for (int i = 0; i < 50 && !found; ++i) {
      if (i > 0) std::this_thread::sleep_for(100ms);
      events = audit("secret:");
      std::istringstream in(events);
      for (std::string line; std::getline(in, line) && !found;)
        found = line.find("\"path\":\"" + path + "\"") != std::string::npos &&
                line.find("\"identity\":[\"" + identity + "\"]") != std::string::npos &&
                line.find(where) != std::string::npos && line.find("\"encodings\":[\"") != std::string::npos;
    }
    EXPECT_TRUE(found) << path << " not audited with " << where << ":\n" << events;
    const std::string everything = audit("");
    for (const std::string& form : forms) EXPECT_EQ(everything.find(form), std::string::npos) << form;
  }

  int fetches_ = 0;
};

// Over IPv4 every variant: the secret in no encoding, the marker present,
// the response complete and framed as announced.
TEST_F(ReflectionTest, EveryHostileVariantOverIpv4IsScrubbedWithFramingIntact) {
  ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
  const std::vector<std::string> forms = leaked_forms(kSecret);
  std::map<std::string, size_t> body_sizes;
  for (const Variant& v : kVariants) {
    const std::string what = (v.head_request ? "HEAD " : "GET ") + v.path;
    Fetched f = fetch("https://api.stripe.com" + v.path, v.head_request, "-4");
    ASSERT_EQ(f.exit_code, 0) << what << "\n" << f.all;
    EXPECT_EQ(f.status, v.status) << what;
    expect_clean(f, forms, what);
    EXPECT_NE(f.all.find("zn-redacted"), std::string::npos) << what << "\n" << f.all;
    if (v.head_request || v.status == 204 || v.status == 304) {
      EXPECT_EQ(f.body_size, 0u) << what;  // (curl -I writes the head to -o)
      if (!v.head_request) {
        EXPECT_TRUE(f.body.empty()) << what << "\n" << f.body;
      }
    } else {
      EXPECT_EQ(f.body.size(), f.body_size) << what;
    }
    if (v.in_body && v.status == 200) {
      // Whole: from the first section to the last line, whatever the framing.
      EXPECT_EQ(f.body.rfind("raw:\n", 0), 0u) << what;
      EXPECT_NE(f.body.find("\nhttpbin:\n"), std::string::npos) << what;
      EXPECT_NE(f.body.find("\nb64url:\n"), std::string::npos) << what;
      EXPECT_EQ(f.body.back(), '\n') << what;
      body_sizes[v.path] = f.body.size();
    }
    if (f.head.find("Content-Length:") != std::string::npos && !v.head_request && v.status != 304) {
      const size_t at = f.head.find("Content-Length:") + 15;
      EXPECT_EQ(std::stoul(f.head.substr(at)), f.body.size()) << what << "\n" << f.head;
    }
    if (v.path == "/reflect/headers" && !v.head_request) {
      // Redacted in the reason phrase, Location, Set-Cookie and a header name.
      EXPECT_NE(f.head.find("302 Found zn-redacted"), std::string::npos) << f.head;
      EXPECT_NE(f.head.find("Set-Cookie: session=zn-redacted"), std::string::npos) << f.head;
      EXPECT_NE(f.head.find("X-Echo-Authorization: Bearer zn-redacted"), std::string::npos) << f.head;
    }
    EXPECT_GE(arrived(v.path, "Bearer " + std::string(kSecret)), 1u) << what << " never reached the upstream";
    expect_audited(v.path, v, "stripe", forms);
  }
  // Content-Length, chunked and close-delimited carried the same body: the
  // same request headers reflected, same-length markers.
  ASSERT_EQ(body_sizes.size(), 3u);
  EXPECT_EQ(body_sizes["/reflect/cl"], body_sizes["/reflect/chunked"]);
  EXPECT_EQ(body_sizes["/reflect/cl"], body_sizes["/reflect/close"]);
  // The upstream was told not to compress.
  EXPECT_NE(upstream_log().find("[\"Accept-Encoding\", \"identity\"]"), std::string::npos);
}

// A compressed body cannot be scanned: 502, nothing of it reaches the guest.
// Positive control: the same request arrived upstream with the secret, and
// the uncompressed variant of it passes (scrubbed) on the same setup.
TEST_F(ReflectionTest, ACompressedResponseIsRefusedNeverPassedUnscanned) {
  ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
  Fetched f = fetch("https://api.stripe.com/reflect/gzip", false, "-4 -H 'Accept-Encoding: gzip'");
  ASSERT_EQ(f.exit_code, 0) << f.all;
  EXPECT_EQ(f.status, 502) << f.all;
  EXPECT_EQ(f.all.find("\x1f\x8b"), std::string::npos);
  expect_clean(f, leaked_forms(kSecret), "gzip");
  EXPECT_EQ(arrived("/reflect/gzip", "Bearer " + std::string(kSecret)), 1u);
  // The guest asked for gzip; the upstream was asked for identity.
  EXPECT_EQ(upstream_log().find("\"Accept-Encoding\", \"gzip"), std::string::npos);
  EXPECT_NE(upstream_log().find("\"Accept-Encoding\", \"identity\""), std::string::npos);
  const std::string events = wait_audit("egress:", "compressed");
  EXPECT_NE(events.find("compressed"), std::string::npos) << events;
  Fetched ok = fetch("https://api.stripe.com/reflect/cl", false, "-4 -H 'Accept-Encoding: gzip'");
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("zn-redacted"), std::string::npos);
  expect_clean(ok, leaked_forms(kSecret), "cl");
}

// IPv6 guest side (curl -6), both upstreams; the odd secret in every
// encoding Python writes, on a v6-only upstream.
TEST_F(ReflectionTest, OverIpv6EveryEncodingOfAnOddSecretIsScrubbed) {
  ASSERT_NE(guest("dig AAAA @8.8.8.8 api.stripe.com +short +tries=1 +time=2").output.find("2001:db8:18::11"),
            std::string::npos);
  ASSERT_NE(
      guest("dig AAAA @8.8.8.8 odd.reflect.test +short +tries=1 +time=2").output.find("2001:db8:18::13"),
      std::string::npos);
  for (const Variant& v : kVariants) {
    if (v.head_request) continue;
    const std::string what = "v6 GET " + v.path;
    Fetched f = fetch("https://api.stripe.com" + v.path, false, "-6");
    ASSERT_EQ(f.exit_code, 0) << what << "\n" << f.all;
    EXPECT_EQ(f.status, v.status) << what;
    expect_clean(f, leaked_forms(kSecret), what);
    EXPECT_NE(f.all.find("zn-redacted"), std::string::npos) << what;
  }
  EXPECT_GE(arrived("/reflect/cl", "Bearer " + std::string(kSecret)), 1u);
  // The odd secret: /v1/** injects it. Each body variant of the reflection
  // on the injecting path.
  const std::vector<std::string> forms = odd_forms();
  for (const std::string path : {"/v1/reflect/cl", "/v1/reflect/chunked", "/v1/reflect/close",
                                 "/v1/reflect/html", "/v1/reflect/headers"}) {
    Fetched f = fetch("https://odd.reflect.test" + path, false, "-6");
    ASSERT_EQ(f.exit_code, 0) << path << "\n" << f.all;
    expect_clean(f, forms, path);
    EXPECT_NE(f.all.find("zn-redacted"), std::string::npos) << path << "\n" << f.all;
  }
}

// The scrubbing covers every response after an injection, on the same guest
// connection and on any later intercepted one of the session: a response to
// a request that carried no secret (the upstream replays the previous
// request's Authorization) is scrubbed too. The upstream log shows the
// replayed request carried no secret, so the marker in its response can
// only be zerod's.
TEST_F(ReflectionTest, LaterResponsesOnThisAndLaterConnectionsAreScrubbedToo) {
  ASSERT_NE(
      guest("dig AAAA @8.8.8.8 odd.reflect.test +short +tries=1 +time=2").output.find("2001:db8:18::13"),
      std::string::npos);
  // Routes through echo_upstream's /reflect/ handler only for paths that
  // start with it: /v1/x is a plain echo that records the Authorization.
  auto r = guest("curl -s -6 -m 15 --http1.1 --cacert " + p("guest-trust.pem") +
                 " https://odd.reflect.test/v1/x https://odd.reflect.test/reflect/replay 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("previous Authorization: Bearer zn-redacted"), std::string::npos) << r.output;
  for (const std::string& form : odd_forms()) EXPECT_EQ(r.output.find(form), std::string::npos) << form;
  // The replay itself carried no secret: it is the later response.
  std::istringstream log(upstream_log());
  bool replay_seen = false;
  for (std::string line; std::getline(log, line);) {
    if (line.find("/reflect/replay") == std::string::npos) continue;
    replay_seen = true;
    EXPECT_EQ(line.find("Authorization"), std::string::npos) << line;
  }
  EXPECT_TRUE(replay_seen);
  expect_audited("/reflect/replay", Variant{"/reflect/replay", false, 200, false, true}, "odd", odd_forms());

  // And on a later connection that injects nothing at all: the upstream
  // stored the token (a request bin, a log viewer) and replays it there.
  auto first = guest("curl -s -6 -m 15 --cacert " + p("guest-trust.pem") + " https://odd.reflect.test/v1/y");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto later =
      guest("curl -s -6 -m 15 --cacert " + p("guest-trust.pem") + " https://odd.reflect.test/reflect/replay");
  ASSERT_EQ(later.exit_code, 0) << later.output;
  EXPECT_EQ(later.output.rfind("previous Authorization: Bearer zn-redacted", 0), 0u) << later.output;
  for (const std::string& form : odd_forms()) EXPECT_EQ(later.output.find(form), std::string::npos) << form;
  EXPECT_GE(arrived("/v1/y", "Bearer " + kOdd), 1u);  // the token did reach the upstream to be replayed
}

// Spellings no list of encoders holds (echo_upstream.py /reflect/rule):
// percent-encoding of a random subset in mixed hex case, MIME base64
// wrapped at 76 (CRLF) and 64 (LF) with a break inside the secret, UTF-16LE
// with a BOM, quoted-printable with a soft break inside it, an RFC 5987
// filename* and an RFC 2231 continuation in the head. Both secrets (the odd
// one over IPv6). Positive control: the same spellings of the secret with
// one byte changed arrive byte for byte (the upstream's hash of its body
// matches) with no marker anywhere.
TEST_F(ReflectionTest, SpellingsFoundByRuleNotByListAreScrubbed) {
  ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
  struct Case {
    std::string base, secret, flag;
  };
  for (const Case& c : {Case{"https://api.stripe.com/reflect/", kSecret, "-4"},
                        Case{"https://odd.reflect.test/v1/reflect/", kOdd, "-6"}}) {
    SCOPED_TRACE(c.base);
    Fetched f = fetch(c.base + "rule", false, c.flag);
    ASSERT_EQ(f.exit_code, 0) << f.all;
    EXPECT_EQ(f.status, 200);
    EXPECT_EQ(f.body.size(), f.body_size);
    for (const char* section : {"pct-any:\n", "mime76:\n", "mime64:\n", "utf16:\n", "qp:\n"})
      EXPECT_NE(f.body.find(section), std::string::npos) << section;
    EXPECT_NE(f.body.find("zn-redacted"), std::string::npos) << f.body;
    EXPECT_NE(f.head.find("filename*=UTF-8''zn-redacted"), std::string::npos) << f.head;
    EXPECT_NE(f.head.find("title*0*=UTF-8''zn-redacted"), std::string::npos) << f.head;
    // Read every way the guest could: no secret.
    const std::string everything = f.head + f.body;
    EXPECT_EQ(percent_decoded(everything).find(c.secret), std::string::npos) << everything;
    std::string joined = f.head;  // the continuation as a reader joins it
    joined.erase(joined.find("; title*1*="), 11);
    EXPECT_EQ(percent_decoded(joined).find(c.secret), std::string::npos) << f.head;
    EXPECT_EQ(without(everything, std::string(1, '\0')).find(c.secret), std::string::npos);
    EXPECT_EQ(qp_decoded(everything).find(c.secret), std::string::npos);
    const std::string unwrapped = without(everything, "\r\n");
    for (const std::string& form : leaked_forms(c.secret))
      EXPECT_EQ(unwrapped.find(form), std::string::npos) << form << "\n" << everything;
    EXPECT_GE(arrived(c.base.substr(c.base.find('/', 8)) + "rule", "Bearer " + c.secret), 1u);

    // Positive control.
    Fetched miss = fetch(c.base + "rule-miss", false, c.flag);
    ASSERT_EQ(miss.exit_code, 0) << miss.all;
    EXPECT_EQ(miss.status, 200);
    EXPECT_EQ(miss.all.find("zn-redacted"), std::string::npos) << miss.all;
    const size_t at = miss.head.find("X-Body-Sha256: ");
    ASSERT_NE(at, std::string::npos) << miss.head;
    EXPECT_EQ(miss.head.substr(at + 15, 64), sha256_hex(miss.body)) << miss.body;
  }
}

}  // namespace
}  // namespace zn::test
