// Leaf minting is shared work (an ECDSA signature on the proxy's pool): each
// session gets a budget of mints, so a guest cycling random SNIs is refused
// once its own budget is spent while cached names and other sessions are
// still served. The bucket itself, then the proxy with a real CA and real
// TLS handshakes from two guest addresses (root: IP_TRANSPARENT listener).
#include "userspace/proxy/mint_budget.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "userspace/net/transparent_socket.h"
#include "userspace/proxy/listener_fixture.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

TEST(MintBudget, ABurstThenTheSustainedRatePerSession) {
  MintBudget budget({/*per_second=*/2, /*burst=*/3, /*max_tracked=*/100});
  const auto t0 = MintBudget::Clock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.take("a", t0)) << i;
  EXPECT_FALSE(budget.take("a", t0));
  EXPECT_TRUE(budget.take("b", t0));  // another session's budget is its own
  EXPECT_FALSE(budget.take("a", t0 + 400ms));
  EXPECT_TRUE(budget.take("a", t0 + 500ms));  // one token back after 1/rate
  EXPECT_FALSE(budget.take("a", t0 + 600ms));
  // Refilled, never beyond the burst.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.take("a", t0 + 60s)) << i;
  EXPECT_FALSE(budget.take("a", t0 + 60s));
}

TEST(MintBudget, ForgettingIdleSessionsNeverRefundsABusyOne) {
  MintBudget budget({/*per_second=*/1, /*burst=*/2, /*max_tracked=*/2});
  const auto t0 = MintBudget::Clock::now();
  EXPECT_TRUE(budget.take("busy", t0));
  EXPECT_TRUE(budget.take("busy", t0));
  EXPECT_TRUE(budget.take("idle", t0 - 10s));
  // A third session prunes what has refilled ("idle"), not "busy".
  EXPECT_TRUE(budget.take("new", t0));
  EXPECT_FALSE(budget.take("busy", t0));
}

// The guest's session is its source address; the name to present is set
// by the test before each connection (the listener is not on 443, so the
// proxy does not read the SNI itself).
class NamedIntercept : public test::ConnectionPolicy {
 public:
  std::string next_host;
  UpstreamDecision decide(const ConnectionFacts& facts) override {
    UpstreamDecision d;
    d.mode = ConnectionMode::kIntercept;
    d.tls = true;
    d.session = net::endpoint_text(facts.guest).rfind("127.0.0.2", 0) == 0 ? "quiet" : "noisy";
    std::lock_guard lock(mu_);
    d.host = next_host;
    return d;
  }
  void set_host(const std::string& h) {
    std::lock_guard lock(mu_);
    next_host = h;
  }

 private:
  std::mutex mu_;
};

// A TLS handshake from `source` to the proxy; true when it completes.
bool handshake(uint16_t port, const char* source, const std::string& sni) {
  const int fd = test::connect_from(port, source);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, sni.c_str());
  const bool ok = SSL_connect(ssl) == 1;
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  ::close(fd);
  return ok;
}

TEST(MintBudgetProxy, AGuestCyclingNamesSpendsOnlyItsOwnBudget) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  zn::test::TempDir dir;
  const auto ca = broker::ensure_deployment_ca(dir.file("ca"), "mint budget test CA");
  NamedIntercept policy;
  ProxyConfig config;
  config.addresses = {"127.0.0.1"};
  config.port = 0;
  config.ca_cert_path = ca.cert;
  config.ca_key_path = ca.key;
  config.mint_budget = {/*per_second=*/0.001, /*burst=*/3, /*max_tracked=*/100};
  TransparentProxy proxy(config, policy);

  for (int i = 0; i < 3; ++i) {
    const std::string name = "n" + std::to_string(i) + ".example";
    policy.set_host(name);
    EXPECT_TRUE(handshake(proxy.port(), "127.0.0.1", name)) << name;  // within the burst
  }
  EXPECT_EQ(proxy.counters().mint_refused, 0u);
  policy.set_host("n3.example");
  EXPECT_FALSE(handshake(proxy.port(), "127.0.0.1", "n3.example"));  // budget spent
  EXPECT_EQ(proxy.counters().mint_refused, 1u);
  // A cached name costs nothing; another session's budget is untouched.
  policy.set_host("n0.example");
  EXPECT_TRUE(handshake(proxy.port(), "127.0.0.1", "n0.example"));
  policy.set_host("q0.example");
  EXPECT_TRUE(handshake(proxy.port(), "127.0.0.2", "q0.example"));
  EXPECT_EQ(proxy.counters().mint_refused, 1u);
}

}  // namespace
}  // namespace zn::proxy
