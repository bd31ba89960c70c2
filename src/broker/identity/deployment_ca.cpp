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
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "broker/secrets/sealer.h"

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

// A new CA: key and self-signed certificate.
std::pair<PKey, Cert> make_ca(const std::string& common_name) {
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
  return {std::move(key), std::move(cert)};
}

void write_cert(const std::string& path, X509* cert) {
  FILE* cf = open_for_write(path, 0644);
  bool ok = PEM_write_X509(cf, cert) == 1;
  ok = (std::fflush(cf) == 0 && ::fsync(fileno(cf)) == 0) && ok;
  std::fclose(cf);
  if (!ok) fail("write " + path);
}

// Writes `text` to a new file beside `path` (0600, fsync) and renames it over
// `path`, then fsyncs the directory: a crash leaves the old file or the new
// one, whole.
void replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());  // a crash's leftover
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail("create " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("write " + tmp + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (!synced || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail("replace " + path + ": " + std::strerror(errno));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// The whole file; refuses one readable by group or others, or a symlink.
std::string read_key_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail("stat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path + " is not a regular file");
  if ((st.st_mode & 077) != 0)
    fail(path + " is readable by group or others; fix its mode (0600) or remove it");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_plain_pem(const std::string& text) { return text.rfind("-----BEGIN", 0) == 0; }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// The PEM of `key` sealed under host_key: serialised into OpenSSL's memory
// BIO, sealed from there, the BIO wiped.
std::string seal_key(const HostKey& host_key, EVP_PKEY* key) {
  std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> bio(BIO_new(BIO_s_secmem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    fail("serialise key");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  std::string envelope =
      seal(host_key, std::string_view(data, static_cast<size_t>(n)), kDeploymentCaKeyContext);
  return envelope + "\n";
}

// Never prompts: an encrypted PEM is refused, not asked about on a tty.
int no_passphrase(char*, int, int, void*) { return 0; }

PKey parse_key(std::string_view pem, const std::string& path) {
  std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PKey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr) : nullptr);
  if (!key) fail(path + " does not hold a private key");
  return key;
}

std::shared_ptr<EVP_PKEY> shared(PKey key) { return std::shared_ptr<EVP_PKEY>(key.release(), EVP_PKEY_free); }

}  // namespace

bool deployment_ca_sealed(const std::string& dir) {
  std::error_code ec;
  const std::string path = (std::filesystem::path(dir) / "ca.key").string();
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  std::string head(9, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return in.gcount() == 9 && head == "znsealed:";
}

DeploymentCa open_deployment_ca(const std::string& dir, const HostKey& host_key, const HostKey* rotating_to,
                                const std::string& common_name) {
  namespace fs = std::filesystem;
  DeploymentCa ca;
  ca.paths = {(fs::path(dir) / "ca.pem").string(), (fs::path(dir) / "ca.key").string()};
  const std::string& key_path = ca.paths.key;
  if (fs::exists(key_path) && fs::exists(ca.paths.cert)) {
    const std::string text = read_key_file(key_path);
    if (is_plain_pem(text)) {
      // From before sealing: sealed in place first, so the plain file is
      // gone (replaced) before the key is used. Any error stops the start.
      PKey key = parse_key(text, key_path);
      replace_file(key_path, seal_key(host_key, key.get()));
      ca.key = shared(std::move(key));
      return ca;
    }
    Unsealed opened = unseal(host_key, trimmed(text), kDeploymentCaKeyContext);
    if (!opened.ok() && rotating_to) opened = unseal(*rotating_to, trimmed(text), kDeploymentCaKeyContext);
    if (!opened.ok()) fail(key_path + ": " + opened.message);
    ca.key = shared(opened.value->reveal([&](std::string_view pem) { return parse_key(pem, key_path); }));
    return ca;
  }
  if (fs::exists(key_path) || fs::exists(ca.paths.cert))
    fail("only one of " + ca.paths.cert + " and " + key_path + " exists; remove it to make a new CA");
  fs::create_directories(dir);
  auto [key, cert] = make_ca(common_name);
  // Key first: a crash in between leaves no certificate without its key.
  const std::string sealed = seal_key(host_key, key.get());
  FILE* kf = open_for_write(key_path, 0600);
  bool ok = std::fwrite(sealed.data(), 1, sealed.size(), kf) == sealed.size();
  ok = (std::fflush(kf) == 0 && ::fsync(fileno(kf)) == 0) && ok;
  std::fclose(kf);
  if (!ok) fail("write " + key_path);
  write_cert(ca.paths.cert, cert.get());
  ca.key = shared(std::move(key));
  return ca;
}

void reseal_deployment_ca(const std::string& dir, const HostKey& from, const HostKey& to) {
  const std::string path = (std::filesystem::path(dir) / "ca.key").string();
  const std::string text = trimmed(read_key_file(path));
  Resealed r = reseal(from, to, text, kDeploymentCaKeyContext);
  if (!r.ok()) fail(path + ": " + r.message);
  if (r.envelope != text) replace_file(path, r.envelope + "\n");
}

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
  auto [key, cert] = make_ca(common_name);
  // Key first and exclusively: a crash in between leaves no certificate
  // without its key.
  FILE* kf = open_for_write(paths.key, 0600);
  bool ok = PEM_write_PrivateKey(kf, key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  ok = (std::fflush(kf) == 0 && ::fsync(fileno(kf)) == 0) && ok;
  std::fclose(kf);
  if (!ok) fail("write " + dir);
  write_cert(paths.cert, cert.get());
  return paths;
}

}  // namespace zn::broker
