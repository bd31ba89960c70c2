// The outside HTTP/2 conformance suite (h2spec, 146 cases of RFC 7540/7541
// and generic ones; ../shared/tools/README.md) run from a guest against an
// intercepted name through zerod: all 146 must pass. Beside it, nginx (a
// TLS http2 server in the stand-in internet) as a peer: its figure is
// printed, not required. tests/userspace/h2/conformance_test.cpp has the
// raw-frame tests of each rule zerod adds to nghttp2's.
#include <sys/stat.h>

#include <chrono>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// The h2spec binary: the build's ZN_H2SPEC (../shared/tools/h2spec beside
// the source tree), or the machine's shared copy; "" when neither exists.
std::string h2spec_binary() {
  for (const std::string& path : {std::string(ZN_H2SPEC), std::string("/work/shared/tools/h2spec")})
    if (::access(path.c_str(), X_OK) == 0) return path;
  return "";
}

struct Report {
  int total = 0, passed = 0;
  std::vector<std::string> failures;  // "package classname: expected / actual"
  std::vector<std::string> failed;    // "package classname"
};

// h2spec's JUnit report: each <testcase> passed unless it holds an
// <error>, <failure> or <skipped> (a skipped case is not a pass).
Report read_report(const std::string& xml) {
  Report r;
  size_t at = 0;
  while ((at = xml.find("<testcase ", at)) != std::string::npos) {
    const size_t end = xml.find("</testcase>", at);
    const std::string tc = xml.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? xml.size() : end;
    ++r.total;
    const auto attr = [&](const std::string& name) {
      const size_t p = tc.find(name + "=\"");
      if (p == std::string::npos) return std::string();
      const size_t from = p + name.size() + 2;
      return tc.substr(from, tc.find('"', from) - from);
    };
    std::string why;
    for (const char* tag : {"<error>", "<failure>", "<skipped>", "<error ", "<failure ", "<skipped/"}) {
      const size_t p = tc.find(tag);
      if (p == std::string::npos) continue;
      why = tag;
      const size_t text = tc.find('>', p) + 1;
      const size_t close = tc.find("</", text);
      if (close != std::string::npos) why += " " + tc.substr(text, close - text);
      break;
    }
    if (why.empty()) {
      ++r.passed;
    } else {
      r.failed.push_back(attr("package") + " " + attr("classname"));
      r.failures.push_back(r.failed.back() + ": " + why);
    }
  }
  return r;
}

class H2specTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    issue_upstream_cert("h2.example");
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    // Every method and path on the intercepted name (h2spec POSTs bodies).
    json r = call("session.update",
                  {{"id", "user-1"},
                   {"policy", R"({"policy":{"allow":[{"host":"api.github.com","paths":["/**"]}]}})"}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
    // The peer: nginx answering every request itself on 198.18.0.15:443.
    const std::string inet = lab_->inet_netns();
    ASSERT_EQ(run_in_netns(inet, "ip addr add 198.18.0.15/32 dev lo").exit_code, 0);
    start_nginx("nginx",
                "  server {\n    listen 198.18.0.15:443 ssl http2;\n    ssl_certificate " +
                    p("h2.example.pem") + ";\n    ssl_certificate_key " + p("h2.example.key") +
                    ";\n    location / { return 200 \"nginx peer\\n\"; }\n  }\n",
                "198.18.0.15 443");
  }
  // h2spec's command line; -o: the seconds it waits for an expected frame
  // (what a failing case costs: zerod's cases pass in about 2 s, nginx's
  // 27 failures wait their timeout).
  std::string h2spec(const std::string& binary, const std::string& host, int timeout_s,
                     const std::string& report) {
    return binary + " -h " + host + " -p 443 -t -k -o " + std::to_string(timeout_s) + " -j " +
           (dir_ / report).string() + " > " + (dir_ / (report + ".log")).string() + " 2>&1";
  }
};

TEST_F(H2specTest, AllCasesPassThroughZerod) {
  const std::string binary = h2spec_binary();
  ASSERT_FALSE(binary.empty()) << "h2spec not found at " << ZN_H2SPEC
                               << " nor /work/shared/tools/h2spec: configure -DZN_H2SPEC=/path/to/h2spec "
                                  "(see ../shared/tools/README.md)";
  // The peer runs beside (its own namespace, its own server), in the
  // background: the test's wall time is the slower of the two.
  const pid_t peer =
      spawn_in(lab_->inet_netns(), {"sh", "-c", h2spec(binary, "198.18.0.15", 1, "nginx.xml")});
  const auto started = std::chrono::steady_clock::now();
  guest(h2spec(binary, "api.github.com", 2, "zerod.xml"));
  const auto zerod_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::waitpid(peer, nullptr, 0);
  const auto all_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  const Report zerod = read_report(slurp(dir_ / "zerod.xml"));
  const Report nginx = read_report(slurp(dir_ / "nginx.xml"));
  std::cout << "h2spec through zerod: " << zerod.passed << " of " << zerod.total << " (" << zerod_secs
            << " s); nginx 1.22 as the peer: " << nginx.passed << " of " << nginx.total << " (" << all_secs
            << " s for both)" << std::endl;
  for (const std::string& f : nginx.failed) std::cout << "  nginx fails " << f << "\n";
  std::string failures;
  for (const std::string& f : zerod.failures) failures += "  " + f + "\n";
  EXPECT_EQ(zerod.total, 146) << slurp(dir_ / "zerod.xml.log");
  EXPECT_EQ(zerod.passed, 146) << failures;
  EXPECT_GT(nginx.total, 0) << "the peer's run: " << slurp(dir_ / "nginx.xml.log");
}

}  // namespace
}  // namespace zn::test
