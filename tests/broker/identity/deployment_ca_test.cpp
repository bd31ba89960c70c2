#include "broker/identity/deployment_ca.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

}  // namespace
}  // namespace zn::broker
