#include "broker/identity/deployment_ca.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "broker/secrets/sealer.h"

namespace zn::broker {
namespace {

namespace fs = std::filesystem;

class DeploymentCaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/zn-ca-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(DeploymentCaTest, MadeOnceAsAnEcdsaP256CaWithAPrivateKey) {
  auto paths = ensure_deployment_ca(dir_);
  struct stat st {};
  ASSERT_EQ(::stat(paths.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  FILE* f = std::fopen(paths.cert.c_str(), "r");
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert), 1);
  EVP_PKEY* pub = X509_get0_pubkey(cert);
  EXPECT_EQ(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
  char group[64];
  size_t len = 0;
  EVP_PKEY_get_group_name(pub, group, sizeof(group), &len);
  EXPECT_STREQ(group, "prime256v1");
  EXPECT_EQ(X509_verify(cert, pub), 1);  // self-signed
  X509_free(cert);
  const std::string before = slurp(paths.cert);
  auto again = ensure_deployment_ca(dir_);  // a restart reuses it
  EXPECT_EQ(slurp(again.cert), before);
  EXPECT_EQ(slurp(paths.cert).find("PRIVATE"), std::string::npos);
}

TEST_F(DeploymentCaTest, RefusesAKeyOthersCanRead) {
  auto paths = ensure_deployment_ca(dir_);
  ::chmod(paths.key.c_str(), 0644);
  EXPECT_THROW(ensure_deployment_ca(dir_), std::runtime_error);
}

TEST_F(DeploymentCaTest, RefusesHalfACa) {
  auto paths = ensure_deployment_ca(dir_);
  fs::remove(paths.key);
  EXPECT_THROW(ensure_deployment_ca(dir_), std::runtime_error);
}

// zerod's CA: the key on disk is sealed under the host key, never a PEM.

X509* read_cert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  X509* cert = f ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
  if (f) std::fclose(f);
  return cert;
}

// Whether `key` is the private half of the certificate at `cert_path` (what
// minting a leaf needs).
bool key_matches(const DeploymentCa& ca) {
  X509* cert = read_cert(ca.paths.cert);
  const bool ok = cert && ca.key && X509_check_private_key(cert, ca.key.get()) == 1;
  X509_free(cert);
  return ok;
}

TEST_F(DeploymentCaTest, TheKeyOnDiskIsSealedAndReopensAfterARestart) {
  const HostKey host = HostKey::generate();
  DeploymentCa ca = open_deployment_ca(dir_, host);
  EXPECT_TRUE(key_matches(ca));
  const std::string on_disk = slurp(ca.paths.key);
  EXPECT_EQ(on_disk.rfind("znsealed:v1:" + host.id() + ":", 0), 0u);
  EXPECT_EQ(on_disk.find("PRIVATE"), std::string::npos);
  EXPECT_EQ(on_disk.find("-----BEGIN"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(ca.paths.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(deployment_ca_sealed(dir_));
  // A restart: the same CA, the same key, the file untouched.
  const std::string cert = slurp(ca.paths.cert);
  DeploymentCa again = open_deployment_ca(dir_, host);
  EXPECT_EQ(slurp(again.paths.cert), cert);
  EXPECT_EQ(slurp(again.paths.key), on_disk);
  EXPECT_TRUE(key_matches(again));
  EXPECT_EQ(EVP_PKEY_eq(ca.key.get(), again.key.get()), 1);
}

TEST_F(DeploymentCaTest, AStateDirWithoutItsHostKeyCannotMint) {
  const HostKey host = HostKey::generate();
  const DeploymentCa ca = open_deployment_ca(dir_, host);
  const std::string cert = slurp(ca.paths.cert), key = slurp(ca.paths.key);
  // Another host's key: refused, and nothing is regenerated over the CA.
  EXPECT_THROW(open_deployment_ca(dir_, HostKey::generate()), std::runtime_error);
  EXPECT_EQ(slurp(ca.paths.cert), cert);
  EXPECT_EQ(slurp(ca.paths.key), key);
  // An altered envelope: refused.
  std::string altered = key;
  altered[altered.size() / 2] = altered[altered.size() / 2] == 'A' ? 'B' : 'A';
  {
    std::ofstream out(ca.paths.key, std::ios::trunc);
    out << altered;
  }
  EXPECT_THROW(open_deployment_ca(dir_, host), std::runtime_error);
  // An envelope sealed for another context (a resource value's) by the
  // right key: refused.
  {
    std::ofstream out(ca.paths.key, std::ios::trunc);
    out << seal(host, "-----BEGIN PRIVATE KEY-----\n", "session/x/resource/y/value") << "\n";
  }
  EXPECT_THROW(open_deployment_ca(dir_, host), std::runtime_error);
  // Positive control: the original file opens.
  {
    std::ofstream out(ca.paths.key, std::ios::trunc);
    out << key;
  }
  EXPECT_TRUE(key_matches(open_deployment_ca(dir_, host)));
}

TEST_F(DeploymentCaTest, APlainKeyFromBeforeSealingIsSealedInPlace) {
  const DeploymentCaPaths old = ensure_deployment_ca(dir_);
  ASSERT_NE(slurp(old.key).find("PRIVATE KEY"), std::string::npos);
  EXPECT_FALSE(deployment_ca_sealed(dir_));
  const std::string cert = slurp(old.cert);
  const HostKey host = HostKey::generate();
  DeploymentCa ca = open_deployment_ca(dir_, host);
  // The same CA (guests keep trusting it), its key now sealed.
  EXPECT_EQ(slurp(ca.paths.cert), cert);
  EXPECT_TRUE(key_matches(ca));
  EXPECT_EQ(slurp(ca.paths.key).find("PRIVATE"), std::string::npos);
  EXPECT_TRUE(deployment_ca_sealed(dir_));
  EXPECT_FALSE(fs::exists(ca.paths.key + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(ca.paths.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Then it opens sealed, and only under that key.
  EXPECT_TRUE(key_matches(open_deployment_ca(dir_, host)));
  EXPECT_THROW(open_deployment_ca(dir_, HostKey::generate()), std::runtime_error);
}

TEST_F(DeploymentCaTest, APlainKeyThatIsNotAKeyStopsTheStart) {
  const DeploymentCaPaths old = ensure_deployment_ca(dir_);
  {
    std::ofstream out(old.key, std::ios::trunc);
    out << "-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n";
  }
  const std::string before = slurp(old.key);
  EXPECT_THROW(open_deployment_ca(dir_, HostKey::generate()), std::runtime_error);
  EXPECT_EQ(slurp(old.key), before);  // nothing replaced
  // And a plain key others can read is refused before it is read.
  const std::string other = dir_ + "/other";
  const DeploymentCaPaths readable = ensure_deployment_ca(other);
  ::chmod(readable.key.c_str(), 0644);
  EXPECT_THROW(open_deployment_ca(other, HostKey::generate()), std::runtime_error);
}

TEST_F(DeploymentCaTest, KeyRotationResealsTheCaKey) {
  const HostKey from = HostKey::generate(), to = HostKey::generate();
  const DeploymentCa ca = open_deployment_ca(dir_, from);
  reseal_deployment_ca(dir_, from, to);
  EXPECT_EQ(slurp(ca.paths.key).rfind("znsealed:v1:" + to.id() + ":", 0), 0u);
  // A rotation a crash interrupted: the old key is still current, the next
  // one opens it.
  EXPECT_TRUE(key_matches(open_deployment_ca(dir_, from, &to)));
  EXPECT_THROW(open_deployment_ca(dir_, from), std::runtime_error);
  // Resumed: already under `to`, kept as it is.
  const std::string sealed = slurp(ca.paths.key);
  reseal_deployment_ca(dir_, from, to);
  EXPECT_EQ(slurp(ca.paths.key), sealed);
  const DeploymentCa after = open_deployment_ca(dir_, to);
  EXPECT_EQ(EVP_PKEY_eq(ca.key.get(), after.key.get()), 1);
}

}  // namespace
}  // namespace zn::broker
