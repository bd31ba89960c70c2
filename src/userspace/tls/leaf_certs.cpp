#include "userspace/tls/leaf_certs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace zn::proxy {
namespace {

using BioPtr = std::unique_ptr<BIO, OpensslDeleter<BIO, BIO_free_all>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpensslDeleter<BIGNUM, BN_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, OpensslDeleter<X509_EXTENSION, X509_EXTENSION_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpensslDeleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, OpensslDeleter<GENERAL_NAME, GENERAL_NAME_free>>;

constexpr std::time_t kBackdate = 60 * 60;               // notBefore = now - 1h
constexpr std::time_t kLeafLifetime = 7 * 24 * 60 * 60;  // notAfter <= now + 7d
constexpr int kMaxCommonName = 64;                       // ub-common-name (RFC 5280)

// OpenSSL keeps a per-thread error queue; a failure left on it would make a
// later, unrelated SSL_get_error on this thread report SSL_ERROR_SSL.
[[noreturn]] void leaf_fail(const std::string& what) {
  ERR_clear_error();
  throw std::runtime_error("leaf certificates: " + what);
}

// Never prompt on a terminal for an encrypted key: a passphrase-protected CA
// key is an error here.
int no_passphrase(char*, int, int, void*) { return 0; }

BioPtr open_file(const std::string& what, const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    int err = errno;
    leaf_fail("cannot read " + what + " " + path + ": " + std::strerror(err));
  }
  return bio;
}

std::time_t to_time_t(const ASN1_TIME* t) {
  struct tm tm {};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) leaf_fail("CA certificate has an invalid validity time");
  return timegm(&tm);
}

ExtensionPtr make_extension(X509* issuer, X509* subject, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, subject, nullptr, nullptr, 0);
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
  if (!ext) leaf_fail(std::string("cannot encode extension ") + OBJ_nid2sn(nid));
  return ext;
}

// OpenSSL 3.0's X509_set_pubkey encodes a provider-native key through the
// OSSL_ENCODER machinery and decodes the result back (measured ~170 us, six
// times the ECDSA signature); a key with a legacy ASN.1 method takes the
// direct path (~4 us). So certificates get the public key from a legacy
// EC_KEY copy of the public half, used for nothing else; the private key
// the handshakes sign with stays provider-native. Falls back to the key itself
// (slow path, same result) if the copy cannot be made.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct EcKeyFree {
  void operator()(EC_KEY* k) const { EC_KEY_free(k); }
};
EvpPkeyPtr public_key_for_certificates(EVP_PKEY* key) {
  std::unique_ptr<EC_KEY, EcKeyFree> full(EVP_PKEY_get1_EC_KEY(key));
  std::unique_ptr<EC_KEY, EcKeyFree> pub(EC_KEY_new());
  EvpPkeyPtr out(EVP_PKEY_new());
  if (full && pub && out && EC_KEY_set_group(pub.get(), EC_KEY_get0_group(full.get())) == 1 &&
      EC_KEY_set_public_key(pub.get(), EC_KEY_get0_public_key(full.get())) == 1 &&
      EVP_PKEY_assign_EC_KEY(out.get(), pub.get()) == 1) {
    static_cast<void>(pub.release());  // owned by out
    if (EVP_PKEY_eq(out.get(), key) == 1) return out;
  }
  ERR_clear_error();
  if (EVP_PKEY_up_ref(key) != 1) leaf_fail("leaf key reference");
  return EvpPkeyPtr(key);
}
#pragma GCC diagnostic pop

bool is_dns_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

}  // namespace

struct LeafCertAuthority::SharedExtensions {
  std::vector<ExtensionPtr> all;
};

LeafName canonical_leaf_name(std::string_view name) {
  auto reject = [&](const char* why) -> LeafName {
    throw std::invalid_argument("leaf certificate name rejected (" + std::string(why) + ")");
  };
  if (name.empty()) return reject("empty");
  if (name.size() > 255) return reject("too long");
  std::string text(name);

  // IP literals, in the one spelling inet_ntop gives them.
  in_addr a4{};
  in6_addr a6{};
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    inet_ntop(AF_INET, &a4, buf, sizeof(buf));
    return {buf, true};
  }
  if (inet_pton(AF_INET6, text.c_str(), &a6) == 1) {
    inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
    return {buf, true};
  }

  // DNS hostnames: lowercase LDH labels (underscore tolerated, as real
  // services use it), 1..63 bytes each, 253 in all, no trailing dot.
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : static_cast<char>(c);
  });
  if (text.back() == '.') text.pop_back();
  if (text.empty()) return reject("empty");
  if (text.size() > 253) return reject("longer than 253 bytes");
  std::size_t start = 0;
  std::string_view last_label;
  while (start <= text.size()) {
    std::size_t end = text.find('.', start);
    if (end == std::string::npos) end = text.size();
    std::string_view label(text.data() + start, end - start);
    if (label.empty()) return reject("empty label");
    if (label.size() > 63) return reject("label longer than 63 bytes");
    if (!std::all_of(label.begin(), label.end(), is_dns_char)) return reject("not a hostname or IP literal");
    if (label.front() == '-' || label.back() == '-') return reject("label starts or ends with '-'");
    last_label = label;
    start = end + 1;
  }
  // "127.1", "0x7f000001", "10.0.0.300": resolvers would treat these as
  // addresses (or nothing); no registrable name ends in a numeric label.
  if (inet_aton(text.c_str(), &a4) != 0 ||
      std::all_of(last_label.begin(), last_label.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return reject("numeric last label: not a canonical IP literal");
  return {text, false};
}

LeafCertAuthority::LeafCertAuthority(const std::string& ca_cert_path, const std::string& ca_key_path,
                                     std::size_t cache_capacity, Clock clock)
    : capacity_(cache_capacity), clock_(std::move(clock)) {
  {
    BioPtr bio = open_file("CA key", ca_key_path);
    ca_key_.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
    if (!ca_key_) leaf_fail(ca_key_path + " does not hold an unencrypted PEM private key");
  }
  init(ca_cert_path, ca_key_path);
}

LeafCertAuthority::LeafCertAuthority(const std::string& ca_cert_path, EVP_PKEY* ca_key,
                                     std::size_t cache_capacity, Clock clock)
    : capacity_(cache_capacity), clock_(std::move(clock)) {
  if (!ca_key || EVP_PKEY_up_ref(ca_key) != 1) leaf_fail("no CA key");
  ca_key_.reset(ca_key);
  init(ca_cert_path, "in memory");
}

void LeafCertAuthority::init(const std::string& ca_cert_path, const std::string& ca_key_name) {
  if (capacity_ == 0) throw std::invalid_argument("leaf certificates: cache capacity must be at least 1");
  if (!clock_) clock_ = [] { return std::time(nullptr); };

  {
    BioPtr bio = open_file("CA certificate", ca_cert_path);
    ca_cert_.reset(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
    if (!ca_cert_) leaf_fail(ca_cert_path + " does not hold a PEM certificate");
  }
  if (X509_check_private_key(ca_cert_.get(), ca_key_.get()) != 1)
    leaf_fail("CA key " + ca_key_name + " does not match CA certificate " + ca_cert_path);
  if (X509_check_ca(ca_cert_.get()) < 1) leaf_fail(ca_cert_path + " is not a CA certificate");
  ca_not_before_ = to_time_t(X509_get0_notBefore(ca_cert_.get()));
  ca_not_after_ = to_time_t(X509_get0_notAfter(ca_cert_.get()));
  if (ca_not_after_ <= clock_()) leaf_fail("CA certificate " + ca_cert_path + " has expired");

  leaf_key_.reset(EVP_EC_gen("P-256"));
  if (!leaf_key_) leaf_fail("leaf key generation");
  cert_public_key_ = public_key_for_certificates(leaf_key_.get());

  // The extensions are the same for every leaf (one key, one issuer): encode
  // them once against a template carrying the leaf public key.
  X509Ptr tmpl(X509_new());
  if (!tmpl || X509_set_pubkey(tmpl.get(), cert_public_key_.get()) != 1) leaf_fail("leaf template");
  shared_ext_ = std::make_unique<SharedExtensions>();
  auto add = [&](int nid, const char* value) {
    shared_ext_->all.push_back(make_extension(ca_cert_.get(), tmpl.get(), nid, value));
  };
  add(NID_basic_constraints, "critical,CA:FALSE");
  add(NID_key_usage, "critical,digitalSignature");
  add(NID_ext_key_usage, "serverAuth");
  add(NID_subject_key_identifier, "hash");
  add(NID_authority_key_identifier, "keyid,issuer");
}

LeafCertAuthority::~LeafCertAuthority() = default;

bool LeafCertAuthority::fresh(const LeafCert& leaf, std::time_t now) const {
  std::time_t lifetime = leaf.not_after() - leaf.not_before();
  return now >= leaf.not_before() && (now - leaf.not_before()) * 5 < lifetime * 4;
}

std::shared_ptr<const LeafCert> LeafCertAuthority::mint(const LeafName& name, std::time_t now) const {
  std::time_t not_before = std::max(now - kBackdate, ca_not_before_);
  std::time_t not_after = std::min(now + kLeafLifetime, ca_not_after_);
  if (not_after <= now) leaf_fail("the deployment CA has expired; cannot mint a leaf for " + name.text);

  X509Ptr x(X509_new());
  if (!x || X509_set_version(x.get(), X509_VERSION_3) != 1) leaf_fail("leaf allocation");

  BignumPtr serial(BN_new());
  do {
    if (!serial || BN_rand(serial.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1)
      leaf_fail("leaf serial");
  } while (BN_is_zero(serial.get()));
  if (!BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x.get()))) leaf_fail("leaf serial");

  if (X509_set_issuer_name(x.get(), X509_get_subject_name(ca_cert_.get())) != 1) leaf_fail("leaf issuer");
  // CN is limited to 64 bytes; a longer name rides in the SAN alone (then
  // the subject is empty and RFC 5280 wants the SAN critical).
  bool with_cn = name.text.size() <= kMaxCommonName;
  if (with_cn &&
      X509_NAME_add_entry_by_txt(X509_get_subject_name(x.get()), "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(name.text.c_str()), -1, -1, 0) != 1)
    leaf_fail("leaf subject for " + name.text);
  if (!ASN1_TIME_set(X509_getm_notBefore(x.get()), not_before) ||
      !ASN1_TIME_set(X509_getm_notAfter(x.get()), not_after))
    leaf_fail("leaf validity");
  if (X509_set_pubkey(x.get(), cert_public_key_.get()) != 1) leaf_fail("leaf public key");

  GeneralNamesPtr sans(GENERAL_NAMES_new());
  GeneralNamePtr gn(GENERAL_NAME_new());
  if (!sans || !gn) leaf_fail("leaf subjectAltName");
  if (name.is_ip) {
    ASN1_OCTET_STRING* ip = a2i_IPADDRESS(name.text.c_str());
    if (!ip) leaf_fail("leaf subjectAltName IP " + name.text);
    GENERAL_NAME_set0_value(gn.get(), GEN_IPADD, ip);
  } else {
    ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
    if (!dns || ASN1_STRING_set(dns, name.text.data(), static_cast<int>(name.text.size())) != 1) {
      ASN1_IA5STRING_free(dns);
      leaf_fail("leaf subjectAltName DNS " + name.text);
    }
    GENERAL_NAME_set0_value(gn.get(), GEN_DNS, dns);
  }
  if (!sk_GENERAL_NAME_push(sans.get(), gn.get())) leaf_fail("leaf subjectAltName");
  static_cast<void>(gn.release());  // owned by sans
  if (X509_add1_ext_i2d(x.get(), NID_subject_alt_name, sans.get(), with_cn ? 0 : 1, X509V3_ADD_DEFAULT) != 1)
    leaf_fail("leaf subjectAltName");

  for (const auto& ext : shared_ext_->all)
    if (X509_add_ext(x.get(), ext.get(), -1) != 1) leaf_fail("leaf extensions");

  if (X509_sign(x.get(), ca_key_.get(), EVP_sha256()) <= 0) leaf_fail("signing the leaf for " + name.text);

  if (EVP_PKEY_up_ref(leaf_key_.get()) != 1) leaf_fail("leaf key reference");
  EvpPkeyPtr key(leaf_key_.get());
  return std::make_shared<const LeafCert>(std::move(x), std::move(key), not_before, not_after);
}

std::shared_ptr<const LeafCert> LeafCertAuthority::cached_locked(const std::string& canonical,
                                                                 std::time_t now) {
  auto it = cache_.find(canonical);
  if (it == cache_.end() || !fresh(*it->second.leaf, now)) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.at);
  ++stats_.hits;
  return it->second.leaf;
}

std::shared_ptr<const LeafCert> LeafCertAuthority::cached(const std::string& name) {
  LeafName canonical;
  try {
    canonical = canonical_leaf_name(name);
  } catch (const std::invalid_argument&) {
    return nullptr;  // leaf_for says why
  }
  std::lock_guard lock(mu_);
  return cached_locked(canonical.text, clock_());
}

std::shared_ptr<const LeafCert> LeafCertAuthority::leaf_for(const std::string& name,
                                                            const std::string& owner) {
  LeafName canonical = canonical_leaf_name(name);
  std::time_t now = clock_();
  {
    std::lock_guard lock(mu_);
    if (auto hit = cached_locked(canonical.text, now)) return hit;
  }

  // Sign outside the lock: other names keep being served (and minted) while
  // this one is. Two threads missing on the same name both mint; the first
  // one stored wins and both return it.
  std::shared_ptr<const LeafCert> leaf = mint(canonical, now);

  std::lock_guard lock(mu_);
  ++stats_.misses;
  auto it = cache_.find(canonical.text);
  if (it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.at);
    if (fresh(*it->second.leaf, now)) return it->second.leaf;
    it->second.leaf = leaf;
    return leaf;
  }
  lru_.push_front(canonical.text);
  cache_.emplace(canonical.text, Entry{leaf, lru_.begin(), owner});
  ++owned_[owner];
  while (cache_.size() > capacity_) evict_one_locked();
  return leaf;
}

void LeafCertAuthority::evict_one_locked() {
  auto heaviest = owned_.begin();
  for (auto o = owned_.begin(); o != owned_.end(); ++o)
    if (o->second > heaviest->second) heaviest = o;
  // Its least recently used leaf: from the back of the one list (the
  // capacity bounds the walk).
  for (auto at = lru_.end(); at != lru_.begin();) {
    --at;
    auto entry = cache_.find(*at);
    if (entry->second.owner != heaviest->first) continue;
    if (--heaviest->second == 0) owned_.erase(heaviest);
    cache_.erase(entry);
    lru_.erase(at);
    ++stats_.evictions;
    return;
  }
}

LeafCertAuthority::Stats LeafCertAuthority::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace zn::proxy
