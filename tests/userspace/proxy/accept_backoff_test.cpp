// The proxy's accept loop when accept(2) fails for want of resources
// (EMFILE): the pending connection stays in the backlog, so an accept loop
// that retries at once spins a core and starves every other connection on
// the same loop. It must back off, and serve the backlog once descriptors
// are available again. Root: the listener is IP_TRANSPARENT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "userspace/proxy/listener_fixture.h"
#include "userspace/proxy/transparent_proxy.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

// Resets everything; this test is about accepting, not deciding.
class ResetAll : public test::ConnectionPolicy {
 public:
  UpstreamDecision decide(const ConnectionFacts&) override { return {}; }
};

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

void connect_fd(int fd, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
}

int tcp_socket() { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

TEST(AcceptBackoff, OutOfDescriptorsTheLoopBacksOffThenServesTheBacklog) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (IP_TRANSPARENT listener)";
  ResetAll policy;
  ProxyConfig config;
  config.addresses = {"127.0.0.1"};
  config.port = 0;
  TransparentProxy proxy(config, policy);

  // Positive control: with descriptors to spare, a connection is accepted.
  const size_t idle_fds = open_fds();
  int first = tcp_socket();
  connect_fd(first, proxy.port());
  for (int i = 0; i < 100 && proxy.counters().accepted < 1; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(proxy.counters().accepted, 1u);
  ::close(first);
  // The proxy resets that connection on its own loop: wait until it has given
  // the descriptor back, or the table filled below keeps a free slot and each
  // client is accepted, reset and closed in turn (seen under TSan's slower loop).
  for (int i = 0; i < 100 && open_fds() > idle_fds; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(open_fds(), idle_fds);

  // Client sockets made while descriptors are free, connected once the
  // table is full: the kernel completes the handshakes into the backlog and
  // only the proxy's accept(2) is left to fail.
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(tcp_socket());
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit tight = saved;
  tight.rlim_cur = open_fds() + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  std::vector<int> fillers;  // take every descriptor number below the limit
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  const uint64_t accepted_before = proxy.counters().accepted;
  for (int fd : clients) connect_fd(fd, proxy.port());

  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(1500ms);
  const double cpu_used = cpu_seconds() - cpu_before;
  const uint64_t errors = proxy.counters().accept_errors;

  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  // The failures happened (the test exercised the path) ...
  EXPECT_GE(errors, 1u);
  EXPECT_EQ(proxy.counters().accepted, accepted_before);
  // ... and cost next to nothing: a loop retrying at once makes hundreds of
  // thousands of attempts and burns the whole 1.5 s on a core.
  EXPECT_LE(errors, 50u);
  EXPECT_LT(cpu_used, 0.3) << errors << " accept errors";
  // Descriptors back: the backlog is served within the longest backoff.
  for (int i = 0; i < 300 && proxy.counters().accepted < accepted_before + clients.size(); ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(proxy.counters().accepted, accepted_before + clients.size());
  for (int fd : clients) ::close(fd);
}

}  // namespace
}  // namespace zn::proxy
