#include "broker/identity/deployment_ca.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

namespace zn::broker {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PKey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("deployment CA: " + what); }

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext || !X509_add_ext(cert, ext, -1)) fail("extension");
  X509_EXTENSION_free(ext);
}

FILE* open_for_write(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) fail("create " + path + ": " + std::strerror(errno));
  return ::fdopen(fd, "w");
}

}  // namespace

DeploymentCaPaths ensure_deployment_ca(const std::string& dir, const std::string& common_name) {
  namespace fs = std::filesystem;
  DeploymentCaPaths paths{(fs::path(dir) / "ca.pem").string(), (fs::path(dir) / "ca.key").string()};
  if (fs::exists(paths.key) && fs::exists(paths.cert)) {
    struct stat st {};
    if (::stat(paths.key.c_str(), &st) != 0 || (st.st_mode & 077) != 0)
      fail(paths.key + " is readable by group or others; fix its mode (0600) or remove it");
    return paths;
  }
  if (fs::exists(paths.key) || fs::exists(paths.cert))
    fail("only one of " + paths.cert + " and " + paths.key + " exists; remove it to make a new CA");
  fs::create_directories(dir);

  PKey key(EVP_EC_gen("P-256"));
  if (!key) fail("key generation");
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  FILE* urandom = std::fopen("/dev/urandom", "rb");
  if (!urandom || std::fread(serial, 1, sizeof(serial), urandom) != sizeof(serial)) fail("serial");
  std::fclose(urandom);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * 365 * 5);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  add_extension(cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
  add_extension(cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(cert.get(), NID_subject_key_identifier, "hash");
  if (!X509_sign(cert.get(), key.get(), EVP_sha256())) fail("sign");

  // Key first and exclusively: a crash in between leaves no certificate
  // without its key.
  FILE* kf = open_for_write(paths.key, 0600);
  bool ok = PEM_write_PrivateKey(kf, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  ok = (std::fflush(kf) == 0 && ::fsync(fileno(kf)) == 0) && ok;
  std::fclose(kf);
  FILE* cf = open_for_write(paths.cert, 0644);
  ok = PEM_write_X509(cf, cert.get()) == 1 && ok;
  std::fclose(cf);
  if (!ok) fail("write " + dir);
  return paths;
}

}  // namespace zn::broker
