// Resource values at rest (issue 12), with zerod as a real process: the
// state directory holds no value in any encoding; a restart opens the sealed
// state and the identity still reaches the upstream; `znctl key rotate`
// reseals under a new key; a wrong or missing key is a refusal to start that
// names the problem and drops nothing, and the right key brings it all back.
// The deployment CA's key is sealed the same way, and a plain one from before
// is sealed on start.
#include <openssl/pem.h>
#include <sodium.h>

#include "broker/identity/deployment_ca.h"
#include "broker/secrets/host_key.h"
#include "integration/proxy_fixture.h"
#include "support/secret_encodings.h"

namespace zn::test {
namespace {

class SealedStateTest : public ProxyTest {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    ProxyTest::SetUp();
  }
  // The upstream saw the identity: a request to the identity rule answers
  // 200 and the echo logs one more "Bearer <secret>".
  void expect_identity_injected(const std::string& why) {
    ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n") << why;
    const size_t before = count(upstream_log(), std::string("\"Bearer ") + kSecret + "\"");
    auto r = curl("-o /dev/null -w '%{http_code}' https://api.stripe.com/v1/charges");
    EXPECT_EQ(r.output, "200") << why;
    EXPECT_EQ(count(upstream_log(), std::string("\"Bearer ") + kSecret + "\""), before + 1) << why;
  }
  // Every file under the state directory, and what of the secret is in it.
  void expect_state_holds_no_secret(const std::string& why) {
    size_t files = 0;
    for (const auto& f : fs::recursive_directory_iterator(dir_ / "state")) {
      if (!f.is_regular_file()) continue;
      ++files;
      const std::string bytes = slurp(f.path());
      for (const std::string& e : encodings_of(kSecret))
        EXPECT_EQ(bytes.find(e), std::string::npos) << why << ": " << f.path() << " holds " << e;
    }
    EXPECT_GT(files, 2u) << why;  // the state file, its journal, the CA, the audit
  }
  fs::path ca_key() const { return dir_ / "state" / "ca" / "ca.key"; }
  // The CA key on disk: one envelope under `key_id`, never a PEM.
  void expect_ca_key_sealed_under(const std::string& key_id, const std::string& why) {
    const std::string text = slurp(ca_key());
    EXPECT_EQ(text.rfind("znsealed:v1:" + key_id + ":", 0), 0u) << why << ": " << text.substr(0, 40);
    EXPECT_EQ(text.find("PRIVATE"), std::string::npos) << why;
    EXPECT_EQ(text.find("-----BEGIN"), std::string::npos) << why;
    EXPECT_EQ(fs::status(ca_key()).permissions() & fs::perms::all,
              fs::perms::owner_read | fs::perms::owner_write);
  }
  std::string state_text() const {
    std::string all;
    for (const auto& f : fs::directory_iterator(dir_ / "state"))
      if (f.path().filename().string().rfind("sessions.json", 0) == 0) all += slurp(f.path());
    return all;
  }
  // zerod run to its end: it must refuse to start. The exit status and log.
  std::pair<int, std::string> run_zerod_expecting_refusal() {
    const fs::path log = dir_ / "refused.log";
    fs::remove(log);
    pid_t pid = ::fork();
    if (pid == 0) {
      FILE* out = std::fopen(log.c_str(), "w");
      ::dup2(fileno(out), 1);
      ::dup2(fileno(out), 2);
      ::execl(ZN_ZEROD_BIN, "zerod", "--config", (dir_ / "zerod.json").c_str(), nullptr);
      ::_exit(127);
    }
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) return {status, slurp(log)};
      std::this_thread::sleep_for(50ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    ADD_FAILURE() << "zerod kept running with the wrong key: " << slurp(log);
    return {status, slurp(log)};
  }
};

TEST_F(SealedStateTest, NothingAtRestARestartOpensItRotationAndAWrongKeyRefused) {
  expect_identity_injected("before any restart");
  expect_state_holds_no_secret("after create");
  const fs::path key = dir_ / "host.key";
  ASSERT_TRUE(fs::exists(key));
  EXPECT_EQ(fs::status(key).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  const std::string first_id = call("key.show")["result"]["id"];
  EXPECT_NE(state_text().find("znsealed:v1:" + first_id + ":"), std::string::npos) << state_text();
  expect_ca_key_sealed_under(first_id, "after the first start");

  // A restart opens the sealed state: the identity still gets there.
  stop_zerod(SIGTERM);
  start_zerod();
  expect_identity_injected("after a restart");

  // Rotation: a new key, the state resealed under it, the old one gone.
  json rotated = call("key.rotate");
  ASSERT_TRUE(rotated["ok"]) << rotated.dump();
  const std::string second_id = rotated["result"]["to"];
  EXPECT_EQ(rotated["result"]["from"], first_id);
  EXPECT_NE(second_id, first_id);
  EXPECT_EQ(call("key.show")["result"]["id"], second_id);
  EXPECT_EQ(state_text().find(first_id), std::string::npos) << state_text();
  EXPECT_FALSE(fs::exists(dir_ / "host.key.next"));
  expect_identity_injected("after rotation");
  stop_zerod(SIGTERM);
  start_zerod();
  expect_identity_injected("after rotation and a restart");
  expect_state_holds_no_secret("after rotation");
  expect_ca_key_sealed_under(second_id, "after rotation");
  stop_zerod(SIGTERM);

  // Another key in its place: a refusal naming both keys; nothing dropped.
  const std::string state_before = state_text(), ca_before = slurp(ca_key());
  fs::rename(key, dir_ / "host.key.saved");
  {
    std::ofstream other(key, std::ios::binary);
    for (int i = 0; i < 32; ++i) other.put(static_cast<char>(i * 7 + 1));
  }
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  auto [status, log] = run_zerod_expecting_refusal();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << log;
  EXPECT_NE(log.find("sealed under key " + second_id), std::string::npos) << log;
  EXPECT_EQ(log.find(kSecret), std::string::npos);
  EXPECT_EQ(state_text(), state_before);
  EXPECT_EQ(slurp(ca_key()), ca_before);  // a state dir without its key cannot mint, nor is a CA made

  // No key at all: a refusal too, not a fresh key and an empty store.
  fs::remove(key);
  std::tie(status, log) = run_zerod_expecting_refusal();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << log;
  EXPECT_NE(log.find("missing"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(key));
  EXPECT_EQ(state_text(), state_before);

  // The right key back: everything is as it was.
  fs::rename(dir_ / "host.key.saved", key);
  start_zerod();
  expect_identity_injected("with the right key back");
}

TEST_F(SealedStateTest, ARotationACrashInterruptedIsFinishedAtTheNextStart) {
  const std::string first_id = call("key.show")["result"]["id"];
  stop_zerod(SIGKILL);
  // The crash fell after the next key was written and before the state was
  // resealed: the next start reseals and renames.
  {
    std::ofstream next(dir_ / "host.key.next", std::ios::binary);
    for (int i = 0; i < 32; ++i) next.put(static_cast<char>(i * 13 + 5));
  }
  fs::permissions(dir_ / "host.key.next", fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  start_zerod();
  const std::string now_id = call("key.show")["result"]["id"];
  EXPECT_NE(now_id, first_id);
  EXPECT_FALSE(fs::exists(dir_ / "host.key.next"));
  EXPECT_EQ(state_text().find(first_id), std::string::npos) << state_text();
  EXPECT_NE(state_text().find(now_id), std::string::npos) << state_text();
  expect_ca_key_sealed_under(now_id, "after the resumed rotation");
  expect_identity_injected("after the resumed rotation");
}

// A state dir from before the CA key was sealed: its plain PEM key (the same
// CA the guests trust) is sealed on start, and leaves are still minted from it.
TEST_F(SealedStateTest, APlainCaKeyFromBeforeSealingIsSealedOnStart) {
  expect_identity_injected("before");
  const std::string id = call("key.show")["result"]["id"];
  stop_zerod(SIGTERM);
  const std::string cert = slurp(dir_ / "state" / "ca" / "ca.pem");
  {
    // What an older zerod left: the same key, as a plain PEM (0600).
    const broker::HostKey host = broker::HostKey::load((dir_ / "host.key").string());
    const broker::DeploymentCa ca = broker::open_deployment_ca((dir_ / "state" / "ca").string(), host);
    fs::remove(ca_key());
    FILE* f = std::fopen(ca_key().c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(PEM_write_PrivateKey(f, ca.key.get(), nullptr, nullptr, 0, nullptr, nullptr), 1);
    std::fclose(f);
    fs::permissions(ca_key(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  }
  ASSERT_NE(slurp(ca_key()).find("PRIVATE KEY"), std::string::npos);
  start_zerod();
  expect_ca_key_sealed_under(id, "after the migration");
  EXPECT_EQ(slurp(dir_ / "state" / "ca" / "ca.pem"), cert);  // the CA guests trust is unchanged
  EXPECT_FALSE(fs::exists(dir_ / "state" / "ca" / "ca.key.tmp"));
  expect_identity_injected("after the migration");
}

}  // namespace
}  // namespace zn::test
