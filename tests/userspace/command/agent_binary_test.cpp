// The zn-agent binary itself: static, and serving signed envelopes on its
// TCP transport (no root: loopback of the test's namespace).
#include <fcntl.h>
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "userspace/command/envelope.h"
#include "userspace/command/frames.h"
#include "userspace/command/reply_seal.h"

#ifdef ZN_AGENT_STATIC
#define ZN_AGENT_STATIC_EXPECTED true
#else
#define ZN_AGENT_STATIC_EXPECTED false
#endif

namespace zn::command {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

// Connects (retrying while the agent starts), sends, reads every frame.
std::vector<Frame> talk(uint16_t port, const std::string& bytes) {
  int s = -1;
  for (int i = 0; i < 100; ++i) {
    s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) break;
    ::close(s);
    s = -1;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_GE(s, 0) << "the agent never listened";
  if (s < 0) return {};
  ::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(s, SHUT_WR);
  std::string buf;
  char chunk[4096];
  for (ssize_t n; (n = ::read(s, chunk, sizeof chunk)) > 0;) buf.append(chunk, static_cast<size_t>(n));
  ::close(s);
  std::vector<Frame> frames;
  while (auto f = take_frame(buf)) frames.push_back(*f);
  return frames;
}

TEST(AgentBinary, IsStaticAndServesOnlyWhatZerodSigned) {
  std::ifstream elf(ZN_AGENT_BIN, std::ios::binary);
  std::stringstream all;
  all << elf.rdbuf();
  // No PT_INTERP program header: no dynamic loader, nothing to find in a
  // guest (a sanitizer build's agent is dynamic, and says so).
  const std::string bin = all.str();
  const bool expect_static = ZN_AGENT_STATIC_EXPECTED;
  ASSERT_GT(bin.size(), 64u);
  uint64_t phoff;
  uint16_t phentsize, phnum;
  std::memcpy(&phoff, bin.data() + 0x20, 8);
  std::memcpy(&phentsize, bin.data() + 0x36, 2);
  std::memcpy(&phnum, bin.data() + 0x38, 2);
  for (uint16_t i = 0; i < phnum; ++i) {
    uint32_t type;
    ASSERT_LE(phoff + (i + 1) * phentsize, bin.size());
    std::memcpy(&type, bin.data() + phoff + i * phentsize, 4);
    if (expect_static) {
      EXPECT_NE(type, 3u) << "zn-agent asks for a dynamic loader (PT_INTERP)";
    }
  }

  ASSERT_GE(sodium_init(), 0);
  PublicKey pk;
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_keypair(pk.data(), sk);
  char hex[2 * kPublicKeySize + 1];
  sodium_bin2hex(hex, sizeof hex, pk.data(), pk.size());
  ResultKey rk;
  randombytes_buf(rk.data(), rk.size());
  // The config file, as `znctl agent provision` writes it: 0600.
  const std::string config = "/tmp/zn-agent-binary-test-" + std::to_string(::getpid()) + ".conf";
  {
    ::unlink(config.c_str());
    const int fd = ::open(config.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    const std::string text = std::string("ZN_SESSION=user-1\nZN_COMMAND_KEY=") + hex +
                             "\nZN_RESULT_KEY=" + result_key_hex(rk) + "\n";
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
  }
  const uint16_t port = free_port();
  const std::string listen = "127.0.0.1:" + std::to_string(port);
  // A config others can read is refused: it holds the result key.
  ASSERT_EQ(::chmod(config.c_str(), 0644), 0);
  {
    const pid_t loose = ::fork();
    if (loose == 0) {
      const int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 2);
      ::execl(ZN_AGENT_BIN, "zn-agent", "--config", config.c_str(), "--listen", listen.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(loose, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << "a world-readable config was accepted";
  }
  ASSERT_EQ(::chmod(config.c_str(), 0600), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(ZN_AGENT_BIN, "zn-agent", "--config", config.c_str(), "--listen", listen.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto sign = [&](std::string_view m) {
    Signature s;
    crypto_sign_detached(s.data(), nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(), sk);
    return s;
  };
  const std::string exec =
      seal_envelope(CommandType::kExec, "user-1", json{{"argv", {"/bin/echo", "agent-ran"}}}.dump(),
                    std::chrono::system_clock::now(), sign);
  auto frames = talk(port, exec);
  ASSERT_EQ(frames.size(), 3u);
  {
    // Sealed under the result key, for this envelope.
    ReplyOpener opener(rk, envelope_nonce(exec));
    for (auto& f : frames) ASSERT_TRUE(opener.open(f)) << "a frame the agent sent does not open";
  }
  EXPECT_EQ(frames[0].kind, FrameKind::kAccepted);
  EXPECT_EQ(frames[1].kind, FrameKind::kStdout);
  EXPECT_EQ(frames[1].payload, "agent-ran\n");
  EXPECT_EQ(json::parse(frames[2].payload).value("exit_code", -1), 0);
  // Replayed, and a forged one: refused with their reasons.
  frames = talk(port, exec);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_TRUE(ReplyOpener(rk, envelope_nonce(exec)).open(frames[0]));
  EXPECT_EQ(json::parse(frames[0].payload).value("reason", ""), "replayed");
  std::string forged = exec;
  forged[20] ^= 1;
  frames = talk(port, forged);
  ASSERT_EQ(frames.size(), 1u);
  ASSERT_TRUE(ReplyOpener(rk, envelope_nonce(forged)).open(frames[0]));
  EXPECT_EQ(json::parse(frames[0].payload).value("reason", ""), "bad_signature");
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  ::unlink(config.c_str());
}

}  // namespace
}  // namespace zn::command
