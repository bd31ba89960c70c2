// The approval webhook as a receiver sees it: a local HTTP listener gets the
// POST, and checks both signatures over the bytes it received, with
// libsodium, as a real receiver would (the HMAC with the shared key file's
// bytes, Ed25519 with zerod's public key). A tampered body fails both. A
// receiver that refuses is retried, and a full queue drops its oldest.
#include "broker/daemon/approval_webhook.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "support/temp_dir.h"

namespace zn::broker {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

struct Received {
  std::map<std::string, std::string> headers;  // lowercased names
  std::string body;
};

// One connection at a time; answers each request with `status`.
class Receiver {
 public:
  explicit Receiver(int status) : status_(status) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~Receiver() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  // Waits (up to 10 s) for `n` requests.
  std::vector<Received> wait_for(size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return got_.size() >= n; });
    return got_;
  }

 private:
  void serve() {
    while (true) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string data;
      char buf[4096];
      size_t head_end = std::string::npos, want = 0;
      while (true) {
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        data.append(buf, static_cast<size_t>(n));
        if (head_end == std::string::npos && (head_end = data.find("\r\n\r\n")) != std::string::npos) {
          std::string lower = data.substr(0, head_end);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          const size_t cl = lower.find("content-length:");
          want = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15));
        }
        if (head_end != std::string::npos && data.size() >= head_end + 4 + want) break;
      }
      Received r;
      if (head_end != std::string::npos) {
        r.body = data.substr(head_end + 4, want);
        size_t pos = data.find("\r\n") + 2;
        while (pos < head_end) {
          const size_t eol = data.find("\r\n", pos);
          const std::string line = data.substr(pos, eol - pos);
          const size_t colon = line.find(':');
          std::string name = line.substr(0, colon);
          for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
          pos = eol + 2;
        }
      }
      const std::string reply =
          "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
      {
        std::lock_guard lock(mu_);
        got_.push_back(std::move(r));
      }
      cv_.notify_all();
    }
  }
  int status_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> got_;
};

// "t=1,v1=ab,ed25519=cd" -> {t: 1, v1: ab, ed25519: cd}
std::map<std::string, std::string> parts(const std::string& header) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t comma = header.find(',', pos);
    if (comma == std::string::npos) comma = header.size();
    const std::string p = header.substr(pos, comma - pos);
    out[p.substr(0, p.find('='))] = p.substr(p.find('=') + 1);
    pos = comma + 1;
  }
  return out;
}

std::vector<unsigned char> unhex(const std::string& hex) {
  std::vector<unsigned char> out(hex.size() / 2);
  size_t len = 0;
  EXPECT_EQ(sodium_hex2bin(out.data(), out.size(), hex.data(), hex.size(), nullptr, &len, nullptr), 0);
  out.resize(len);
  return out;
}

bool hmac_ok(const std::string& key, const std::string& t, const std::string& body, const std::string& v1) {
  const std::string message = t + "." + body;
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(key.data()), key.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(message.data()), message.size());
  crypto_auth_hmacsha256_final(&st, mac);
  const std::vector<unsigned char> got = unhex(v1);
  return got.size() == sizeof mac && sodium_memcmp(got.data(), mac, sizeof mac) == 0;
}

bool ed25519_ok(const Ed25519PublicKey& pk, const std::string& t, const std::string& body,
                const std::string& sig) {
  const std::string message = t + "." + body;
  const std::vector<unsigned char> s = unhex(sig);
  return s.size() == crypto_sign_BYTES &&
         crypto_sign_verify_detached(s.data(), reinterpret_cast<const unsigned char*>(message.data()),
                                     message.size(), pk.data()) == 0;
}

std::string write_key(const zn::test::TempDir& dir, const std::string& name, mode_t mode) {
  const std::string path = dir.file(name);
  std::string key(32, '\0');
  randombytes_buf(key.data(), key.size());
  std::ofstream(path, std::ios::binary) << key;
  ::chmod(path.c_str(), mode);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ApprovalWebhook, TheReceiverVerifiesBothSignaturesOverWhatItGot) {
  ASSERT_GE(sodium_init(), 0);
  zn::test::TempDir dir;
  Receiver receiver(200);
  ApprovalWebhookConfig config;
  config.url = receiver.url();
  config.hmac_key_file = write_key(dir, "webhook.key", 0600);
  config.ed25519 = true;
  const std::string signing_path = dir.file("keys/webhook-ed25519.key");
  ApprovalWebhook hook(ApprovalWebhook::options_for(config, signing_path));
  // The signing key was made on this first start, 0600.
  struct stat st {};
  ASSERT_EQ(::stat(signing_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const json notice = {{"event", "held"},    {"ticket", 42},          {"session", "s1"},
                       {"method", "DELETE"}, {"host", "api.example"}, {"body_preview", "a=<redacted>"}};
  hook.enqueue(notice);
  const auto got = receiver.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  const Received& r = got[0];
  EXPECT_EQ(json::parse(r.body), notice);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("x-zeroness-event"), "approval.held");
  ASSERT_TRUE(r.headers.count("x-zeroness-signature"));
  auto sig = parts(r.headers.at("x-zeroness-signature"));
  ASSERT_TRUE(sig.count("t") && sig.count("v1") && sig.count("ed25519"))
      << r.headers.at("x-zeroness-signature");
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_LE(std::abs(std::stoll(sig["t"]) - now), 60);
  const std::string key = slurp(config.hmac_key_file);
  const Ed25519PublicKey pk = hook.signing_key()->public_key();
  EXPECT_TRUE(hmac_ok(key, sig["t"], r.body, sig["v1"]));
  EXPECT_TRUE(ed25519_ok(pk, sig["t"], r.body, sig["ed25519"]));
  // Tampered: another body, another time, another key.
  std::string tampered = r.body;
  tampered[tampered.size() / 2] ^= 1;
  EXPECT_FALSE(hmac_ok(key, sig["t"], tampered, sig["v1"]));
  EXPECT_FALSE(ed25519_ok(pk, sig["t"], tampered, sig["ed25519"]));
  EXPECT_FALSE(hmac_ok(key, std::to_string(std::stoll(sig["t"]) + 1), r.body, sig["v1"]));
  EXPECT_FALSE(hmac_ok(std::string(32, 'k'), sig["t"], r.body, sig["v1"]));
  // The same signing key on the next start.
  ApprovalWebhook again(ApprovalWebhook::options_for(config, signing_path));
  EXPECT_EQ(again.signing_key()->public_key(), pk);
  // Counted once the reply is read (after the receiver recorded the request).
  for (int i = 0; i < 500 && hook.stats().sent == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(hook.stats().sent, 1u);
  EXPECT_EQ(hook.stats().failed, 0u);
}

TEST(ApprovalWebhook, AKeyFileOthersCanReadIsRefused) {
  zn::test::TempDir dir;
  ApprovalWebhookConfig config;
  config.url = "http://127.0.0.1:9/hook";
  for (mode_t mode : {0644, 0640, 0604}) {
    config.hmac_key_file = write_key(dir, "open-" + std::to_string(mode) + ".key", mode);
    EXPECT_THROW(ApprovalWebhook::options_for(config, dir.file("ed.key")), std::runtime_error) << mode;
  }
  config.hmac_key_file = write_key(dir, "ok.key", 0600);  // positive control
  EXPECT_NO_THROW(ApprovalWebhook::options_for(config, dir.file("ed.key")));
}

TEST(ApprovalWebhook, ARefusingReceiverIsRetriedThenCountedAsFailed) {
  zn::test::TempDir dir;
  Receiver receiver(503);
  ApprovalWebhookConfig config;
  config.url = receiver.url();
  config.hmac_key_file = write_key(dir, "webhook.key", 0600);
  ApprovalWebhook::Options o = ApprovalWebhook::options_for(config, dir.file("unused.key"));
  o.backoff = 10ms;
  ApprovalWebhook hook(std::move(o));
  hook.enqueue({{"event", "held"}, {"ticket", 1}});
  EXPECT_EQ(receiver.wait_for(3).size(), 3u);
  for (int i = 0; i < 200 && hook.stats().failed == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(hook.stats().failed, 1u);
  EXPECT_EQ(hook.stats().attempts, 3u);
  EXPECT_EQ(hook.stats().sent, 0u);
}

TEST(ApprovalWebhook, AFullQueueDropsItsOldest) {
  zn::test::TempDir dir;
  // Accepts nothing: each attempt waits out its timeout.
  int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
  ::listen(silent, 1);
  ApprovalWebhookConfig config;
  config.url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/hook";
  config.hmac_key_file = write_key(dir, "webhook.key", 0600);
  ApprovalWebhook::Options o = ApprovalWebhook::options_for(config, dir.file("unused.key"));
  o.queue_limit = 2;
  o.timeout = 2000ms;
  ApprovalWebhook hook(std::move(o));
  for (int i = 0; i < 6; ++i) hook.enqueue({{"event", "held"}, {"ticket", i}});
  // At most one taken by the notifier, two queued: three or four dropped.
  EXPECT_GE(hook.stats().dropped, 3u);
  EXPECT_LE(hook.stats().dropped, 4u);
  hook.stop();  // abandons the attempt in flight at once
  ::close(silent);
}

}  // namespace
}  // namespace zn::broker
