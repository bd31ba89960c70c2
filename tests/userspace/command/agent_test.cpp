// The agent's core over a socketpair: real envelopes signed by a test key,
// real commands run by the agent (no root).
#include "userspace/command/agent.h"

#include <gtest/gtest.h>
#include <sodium.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "userspace/command/frames.h"

namespace zn::command {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Reply {
  std::string out, err, data;
  json result, reject;
  bool sealed = true;     // every frame opened under the result key, in order
  bool accepted = false;  // the first frame said the envelope was admitted
  size_t frames = 0;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    crypto_sign_keypair(pk_.data(), sk_);
    crypto_sign_keypair(other_pk_.data(), other_sk_);
    AgentConfig c;
    c.session = "user-1";
    c.key = pk_;
    randombytes_buf(result_key_.data(), result_key_.size());
    c.result_key = result_key_;
    c.read_timeout = 2s;
    agent_ = std::make_unique<Agent>(c);
    dir_ = fs::temp_directory_path() / ("zn-agent-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string seal(CommandType type, const std::string& body, const std::string& session = "user-1",
                   std::chrono::system_clock::duration skew = 0s, bool other_key = false) {
    const unsigned char* sk = other_key ? other_sk_ : sk_;
    return seal_envelope(
        type, session, body, std::chrono::system_clock::now() + skew, [sk](std::string_view m) {
          Signature s;
          crypto_sign_detached(s.data(), nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(),
                               sk);
          return s;
        });
  }
  // Sends `bytes` (then half-closes when asked) and collects the frames.
  Reply exchange(const std::string& bytes, bool half_close = true, ServeOutcome* outcome = nullptr) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    auto served = std::async(std::launch::async, [&] {
      ServeOutcome o = agent_->serve(sv[0]);
      ::shutdown(sv[0], SHUT_RDWR);
      return o;
    });
    EXPECT_EQ(::write(sv[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    if (half_close) ::shutdown(sv[1], SHUT_WR);
    Reply r;
    std::string buf;
    char chunk[4096];
    for (;;) {
      const ssize_t n = ::read(sv[1], chunk, sizeof chunk);
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
    }
    std::vector<Frame> frames;
    while (auto f = take_frame(buf)) frames.push_back(*f);
    // Sealed for the envelope's nonce, or (a refusal of bytes too short to
    // hold one) for zeros.
    Nonce nonce{};
    if (bytes.size() >= 24) std::copy_n(bytes.data() + 8, nonce.size(), nonce.begin());
    for (const Nonce& n : {nonce, Nonce{}}) {
      std::vector<Frame> opened = frames;
      ReplyOpener opener(result_key_, n);
      r.sealed = true;
      for (Frame& f : opened) r.sealed = r.sealed && opener.open(f);
      if (r.sealed) {
        frames = opened;
        break;
      }
    }
    EXPECT_TRUE(r.sealed) << "a reply frame does not open under the result key";
    r.frames = frames.size();
    for (auto* f = frames.data(); f != frames.data() + frames.size(); ++f) {
      switch (f->kind) {
        case FrameKind::kAccepted:
          EXPECT_EQ(f, frames.data()) << "kAccepted after another frame";
          r.accepted = true;
          break;
        case FrameKind::kStdout:
          r.out += f->payload;
          break;
        case FrameKind::kStderr:
          r.err += f->payload;
          break;
        case FrameKind::kData:
          r.data += f->payload;
          break;
        case FrameKind::kResult:
          r.result = json::parse(f->payload);
          break;
        case FrameKind::kReject:
          r.reject = json::parse(f->payload);
          break;
      }
    }
    const ServeOutcome o = served.get();
    if (outcome) *outcome = o;
    ::close(sv[0]);
    ::close(sv[1]);
    return r;
  }
  std::string reason_of(const std::string& bytes) {
    const Reply r = exchange(bytes);
    EXPECT_TRUE(r.result.is_null()) << r.result.dump();
    return r.reject.value("reason", "");
  }

  PublicKey pk_{}, other_pk_{};
  ResultKey result_key_{};
  unsigned char sk_[crypto_sign_SECRETKEYBYTES], other_sk_[crypto_sign_SECRETKEYBYTES];
  std::unique_ptr<Agent> agent_;
  fs::path dir_;
};

TEST_F(AgentTest, AnHonestExecRunsAndItsOutputAndExitComeBack) {
  const Reply r =
      exchange(seal(CommandType::kExec, json{{"argv", {"sh", "-c", "cat; echo to-err >&2; exit 3"}},
                                             {"env", {{"PATH", "/usr/bin:/bin"}}},
                                             {"stdin", "from-stdin\n"}}
                                            .dump()));
  EXPECT_EQ(r.out, "from-stdin\n");
  EXPECT_EQ(r.err, "to-err\n");
  EXPECT_EQ(r.result.value("exit_code", -1), 3) << r.result.dump();
  EXPECT_FALSE(r.result.value("timed_out", true));
  EXPECT_TRUE(r.accepted);
}

// A command starts with no signal blocked or ignored, whatever the agent
// blocks (SIGIO) or ignores (SIGPIPE): with SIGPIPE ignored `yes | head`
// ends in an error instead of the quiet death a shell expects.
TEST_F(AgentTest, ACommandStartsWithTheDefaultSignalDispositions) {
  sigset_t io, old;
  sigemptyset(&io);
  sigaddset(&io, SIGIO);
  ::pthread_sigmask(SIG_BLOCK, &io, &old);
  auto* previous = ::signal(SIGPIPE, SIG_IGN);
  const Reply r = exchange(seal(CommandType::kExec, json{{"argv",
                                                          {"/bin/sh", "-c",
                                                           "grep -E '^Sig(Blk|Ign)' /proc/self/status; "
                                                           "yes | head -c 4"}},
                                                         {"timeout_ms", 10000}}
                                                        .dump()));
  ::signal(SIGPIPE, previous);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  EXPECT_NE(r.out.find("SigBlk:\t0000000000000000\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SigIgn:\t0000000000000000\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("y\ny\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(r.result.value("timed_out", true)) << r.result.dump();
}

// A stream that ends before its first byte was no command: nothing is
// answered (zerod closing a virtio-serial connection after a reply looks
// just like this). One byte is an envelope cut short, refused as such.
TEST_F(AgentTest, NothingIsAnsweredToAStreamThatSentNothing) {
  ServeOutcome o;
  const Reply r = exchange("", true, &o);
  EXPECT_EQ(r.frames, 0u);
  EXPECT_EQ(o.reason, "no_envelope");
  EXPECT_FALSE(o.ran);
  const Reply one = exchange("Z", true, &o);
  EXPECT_EQ(one.reject.value("reason", ""), "truncated");
  EXPECT_TRUE(o.unread);
}

TEST_F(AgentTest, ExecGetsExactlyItsEnvironmentAndCwd) {
  const Reply r = exchange(
      seal(CommandType::kExec,
           json{{"argv", {"/usr/bin/env"}}, {"env", {{"ONLY", "this"}}}, {"cwd", dir_.string()}}.dump()));
  EXPECT_EQ(r.out, "ONLY=this\n");
  const Reply pwd =
      exchange(seal(CommandType::kExec, json{{"argv", {"/bin/pwd"}}, {"cwd", dir_.string()}}.dump()));
  EXPECT_EQ(pwd.out, dir_.string() + "\n");
}

TEST_F(AgentTest, ATimeoutKillsTheCommandAndSaysSo) {
  const auto start = std::chrono::steady_clock::now();
  const Reply r =
      exchange(seal(CommandType::kExec,
                    json{{"argv", {"/bin/sh", "-c", "sleep 30 & sleep 30"}}, {"timeout_ms", 300}}.dump()));
  EXPECT_TRUE(r.result.value("timed_out", false)) << r.result.dump();
  EXPECT_EQ(r.result.value("signal", 0), SIGKILL) << r.result.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(AgentTest, PutAndGetAFile) {
  const std::string path = (dir_ / "f.bin").string();
  const std::string bytes("a\0b\nc", 5);
  Reply r = exchange(seal(CommandType::kPut, json{{"path", path}, {"mode", 0600}}.dump() + "\n" + bytes));
  EXPECT_EQ(r.result.value("bytes", 0), 5) << r.result.dump();
  EXPECT_EQ((fs::status(path).permissions() & fs::perms::all),
            fs::perms::owner_read | fs::perms::owner_write);
  r = exchange(seal(CommandType::kGet, json{{"path", path}}.dump()));
  EXPECT_EQ(r.data, bytes);
  r = exchange(seal(CommandType::kGet, json{{"path", path}, {"max_bytes", 4}}.dump()));
  EXPECT_TRUE(r.data.empty());
  EXPECT_EQ(r.result.value("error", ""), "larger than max_bytes");
  r = exchange(seal(CommandType::kPut, json{{"path", "relative"}}.dump() + "\nx"));
  EXPECT_EQ(r.reject.value("reason", ""), "malformed");
}

TEST_F(AgentTest, EveryForgeryIsRefusedWithItsReasonAndNothingRuns) {
  const std::string marker = (dir_ / "ran").string();
  const std::string body = json{{"argv", {"/usr/bin/touch", marker}}}.dump();
  std::string tampered_body = seal(CommandType::kExec, body);
  tampered_body[tampered_body.size() - 3] ^= 1;
  std::string tampered_header = seal(CommandType::kExec, body);
  tampered_header[30] ^= 1;  // inside the issued time
  const std::string honest = seal(CommandType::kExec, body);
  // A refusal is the one frame: nothing says the command was accepted.
  const Reply refused = exchange(tampered_header);
  EXPECT_EQ(refused.frames, 1u);
  EXPECT_FALSE(refused.accepted);
  EXPECT_EQ(reason_of(tampered_body), "bad_body_hash");
  EXPECT_EQ(reason_of(tampered_header), "bad_signature");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, body, "user-1", 0s, true)), "bad_signature");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, body, "user-2")), "wrong_session");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, body, "user-1", -40s)), "stale");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, body, "user-1", 40s)), "future");
  EXPECT_EQ(reason_of(honest.substr(0, honest.size() - 4)), "truncated");
  EXPECT_EQ(reason_of(honest.substr(0, 40)), "truncated");
  EXPECT_EQ(reason_of("GET / HTTP/1.1\r\nHost: agent\r\n\r\n"), "bad_magic");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, std::string(64 * 1024 + 1, ' '))), "oversized");
  EXPECT_FALSE(fs::exists(marker)) << "a refused envelope ran";
  // The positive control: the same command, honestly sealed, runs; replayed, it does not.
  ServeOutcome o;
  exchange(honest, true, &o);
  EXPECT_TRUE(o.ran);
  EXPECT_TRUE(fs::exists(marker));
  fs::remove(marker);
  EXPECT_EQ(reason_of(honest), "replayed");
  EXPECT_FALSE(fs::exists(marker));
}

TEST_F(AgentTest, ASlowOrSilentClientIsRefusedAtTheReadTimeout) {
  const std::string honest = seal(CommandType::kPing, "");
  const auto start = std::chrono::steady_clock::now();
  const Reply r = exchange(honest.substr(0, 20), /*half_close=*/false);
  EXPECT_EQ(r.reject.value("reason", ""), "truncated");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(exchange(seal(CommandType::kPing, "")).result.value("pong", false), true);
}

TEST_F(AgentTest, ExecRunsAsTheUidItNamesAndOnlyRootCanChangeIt) {
  const Reply self = exchange(seal(CommandType::kExec, json{{"argv", {"/usr/bin/id", "-u"}}}.dump()));
  EXPECT_EQ(self.out, std::to_string(::geteuid()) + "\n");
  const Reply other = exchange(
      seal(CommandType::kExec, json{{"argv", {"/usr/bin/id", "-u"}}, {"uid", 65534}, {"gid", 65534}}.dump()));
  if (::geteuid() == 0) {
    EXPECT_EQ(other.out, "65534\n");
    EXPECT_EQ(other.result.value("exit_code", -1), 0);
  } else {
    // Not root: the identity cannot be had, and nothing runs as ourselves instead.
    EXPECT_EQ(other.out, "");
    EXPECT_EQ(other.result.value("exit_code", -1), 126);
  }
  EXPECT_EQ(reason_of(seal(CommandType::kExec, json{{"argv", {"/bin/true"}}, {"uid", -1}}.dump())),
            "malformed");
  EXPECT_EQ(reason_of(seal(CommandType::kExec, json{{"argv", {"/bin/true"}}, {"uid", "0"}}.dump())),
            "malformed");
}

TEST_F(AgentTest, ARekeyPinsTheNewKeyAndTheOldOneIsRefusedAfter) {
  char hex[2 * kPublicKeySize + 1];
  sodium_bin2hex(hex, sizeof hex, other_pk_.data(), other_pk_.size());
  // Signed by a key the agent does not pin: refused, nothing pinned.
  EXPECT_EQ(reason_of(seal(CommandType::kRekey, json{{"key", hex}}.dump(), "user-1", 0s, true)),
            "bad_signature");
  EXPECT_EQ(exchange(seal(CommandType::kPing, "")).result.value("pong", false), true);
  EXPECT_EQ(reason_of(seal(CommandType::kRekey, json{{"key", "abcd"}}.dump())), "malformed");
  const Reply r = exchange(seal(CommandType::kRekey, json{{"key", hex}}.dump()));
  EXPECT_EQ(r.result.value("rekeyed", false), true) << r.reject.dump();
  EXPECT_EQ(reason_of(seal(CommandType::kPing, "")), "bad_signature");
  EXPECT_EQ(exchange(seal(CommandType::kPing, "", "user-1", 0s, true)).result.value("pong", false), true);
}

TEST_F(AgentTest, ARekeyThatCannotBeKeptChangesNothing) {
  AgentConfig c;
  c.session = "user-1";
  c.key = pk_;
  c.result_key = result_key_;
  c.on_rekey = [](const PublicKey&) { throw std::runtime_error("disk full"); };
  agent_ = std::make_unique<Agent>(c);
  char hex[2 * kPublicKeySize + 1];
  sodium_bin2hex(hex, sizeof hex, other_pk_.data(), other_pk_.size());
  const Reply r = exchange(seal(CommandType::kRekey, json{{"key", hex}}.dump()));
  EXPECT_EQ(r.result.value("rekeyed", true), false);
  EXPECT_EQ(r.result.value("error", ""), "disk full");
  EXPECT_EQ(exchange(seal(CommandType::kPing, "")).result.value("pong", false), true);
}

}  // namespace
}  // namespace zn::command
