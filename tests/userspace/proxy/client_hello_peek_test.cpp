// The proxy reads a guest's ClientHello on port 443 however the guest cuts
// it into TCP segments (a hostile guest splits it to hide the SNI from a
// reader of one segment): whole, in pieces, the record header alone, a byte
// at a time. The decision is made once, from the whole hello. Controls: a
// hello cut short by the guest's FIN gets no decision, and bytes that are
// not TLS are decided as not TLS. Root: IP_TRANSPARENT listener on
// 127.0.0.77:443 (a loopback address no other test binds).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/client_hello_bytes.h"
#include "userspace/proxy/listener_fixture.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

constexpr const char* kListen = "127.0.0.77";

// Records the facts of each decided connection; resets them all.
class RecordingPolicy : public test::ConnectionPolicy {
 public:
  UpstreamDecision decide(const ConnectionFacts& facts) override {
    std::lock_guard lock(mu_);
    decided_.push_back(facts);
    return {};  // kReset
  }
  std::vector<ConnectionFacts> decided() {
    std::lock_guard lock(mu_);
    return decided_;
  }

 private:
  std::mutex mu_;
  std::vector<ConnectionFacts> decided_;
};

// Sends `bytes` to the proxy cut at `cuts` (each piece its own segment, a
// pause between), then, with `close_after`, ends the stream; waits until
// the policy has decided once (or 3 s pass) and returns what it decided.
std::optional<ConnectionFacts> decide_after(RecordingPolicy& policy, const std::string& bytes,
                                            const std::vector<size_t>& cuts, bool close_after = false) {
  const size_t before = policy.decided().size();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(443);
  inet_pton(AF_INET, kListen, &to.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  size_t at = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(bytes.size());
  for (size_t end : ends) {
    EXPECT_EQ(::send(fd, bytes.data() + at, end - at, MSG_NOSIGNAL), static_cast<ssize_t>(end - at));
    at = end;
    std::this_thread::sleep_for(30ms);
  }
  if (close_after) ::shutdown(fd, SHUT_WR);
  std::optional<ConnectionFacts> out;
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<ConnectionFacts> now = policy.decided();
    if (now.size() > before) {
      out = now.back();
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  ::close(fd);
  return out;
}

TEST(ClientHelloPeek, AHelloCutAnywhereIsReadWholeBeforeTheDecision) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  RecordingPolicy policy;
  ProxyConfig config;
  config.addresses = {kListen};
  config.port = 443;
  TransparentProxy proxy(config, policy);
  const std::vector<uint8_t> written = zn::test::make_client_hello({.sni = "split.example"});
  const std::string hello(written.begin(), written.end());
  ASSERT_GT(hello.size(), 64u);

  std::vector<size_t> every_byte_of_the_head;
  for (size_t i = 1; i <= 12; ++i) every_byte_of_the_head.push_back(i);
  const std::vector<std::pair<const char*, std::vector<size_t>>> cuts = {
      {"whole", {}},
      {"record header alone", {5}},
      {"three pieces", {40, hello.size() / 2}},
      {"in the name", {hello.find("split") + 3}},
      {"a byte at a time, then the rest", every_byte_of_the_head},
      {"all but the last byte", {hello.size() - 1}},
  };
  for (const auto& [name, at] : cuts) {
    SCOPED_TRACE(name);
    const std::optional<ConnectionFacts> facts = decide_after(policy, hello, at);
    ASSERT_TRUE(facts.has_value());
    EXPECT_TRUE(facts->tls);
    EXPECT_EQ(facts->sni, std::optional<std::string>("split.example"));
  }
  EXPECT_EQ(policy.decided().size(), cuts.size());  // once per connection

  // Controls: a hello the guest ends halfway is never decided; bytes that
  // are no TLS are decided as such, without a name.
  EXPECT_FALSE(decide_after(policy, hello.substr(0, hello.size() / 2), {20}, /*close_after=*/true));
  const std::optional<ConnectionFacts> plain = decide_after(policy, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", {});
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->tls);
  EXPECT_FALSE(plain->sni.has_value());
}

}  // namespace
}  // namespace zn::proxy
