// Leaf certificates the proxy presents to guests when it terminates TLS: one
// per name (the SNI), minted on demand from the deployment CA
// (broker/identity/deployment_ca.h) and kept in a bounded LRU cache.
//
// All leaves share ONE P-256 key made when the authority is built, so minting
// costs one ECDSA signature, not a key generation. That key lives only in
// this process's memory; the CA key is read once from its 0600 file.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace zn::proxy {

// unique_ptrs for the OpenSSL objects used by the proxy's TLS code.
template <typename T, void (*Free)(T*)>
struct OpensslDeleter {
  void operator()(T* p) const { Free(p); }
};
using X509Ptr = std::unique_ptr<X509, OpensslDeleter<X509, X509_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpensslDeleter<EVP_PKEY, EVP_PKEY_free>>;

// One minted leaf. Immutable once made; holds its own references, so it stays
// valid after the cache evicts or replaces it.
class LeafCert {
 public:
  LeafCert(X509Ptr cert, EvpPkeyPtr key, std::time_t not_before, std::time_t not_after)
      : cert_(std::move(cert)), key_(std::move(key)), not_before_(not_before), not_after_(not_after) {}

  X509* cert() const { return cert_.get(); }
  EVP_PKEY* key() const { return key_.get(); }
  std::time_t not_before() const { return not_before_; }
  std::time_t not_after() const { return not_after_; }

 private:
  X509Ptr cert_;
  EvpPkeyPtr key_;
  std::time_t not_before_;
  std::time_t not_after_;
};

// The canonical form of a name leaf_for accepts: a DNS hostname lowercased
// without a trailing dot, or an IPv4/IPv6 address in inet_ntop form. Throws
// std::invalid_argument for anything else (wildcards, ports, empty labels,
// inet_aton shorthands such as "127.1", a numeric last label, > 253 bytes).
struct LeafName {
  std::string text;
  bool is_ip = false;
};
LeafName canonical_leaf_name(std::string_view name);

class LeafCertAuthority {
 public:
  using Clock = std::function<std::time_t()>;

  // Loads the CA certificate and key (PEM). Throws std::runtime_error naming
  // the file and the problem (unreadable, not a certificate/key, key does not
  // match the certificate, not a CA, expired); never includes key material.
  // `clock` is for tests (default: time(nullptr)).
  LeafCertAuthority(const std::string& ca_cert_path, const std::string& ca_key_path,
                    std::size_t cache_capacity = 1024, Clock clock = {});
  // The same with the CA key already in memory (zerod opens it sealed,
  // never as a file); a reference is taken on `ca_key`.
  LeafCertAuthority(const std::string& ca_cert_path, EVP_PKEY* ca_key, std::size_t cache_capacity = 1024,
                    Clock clock = {});
  ~LeafCertAuthority();
  LeafCertAuthority(const LeafCertAuthority&) = delete;
  LeafCertAuthority& operator=(const LeafCertAuthority&) = delete;

  // The cached leaf for `name`, or a freshly minted one: subject CN=name,
  // subjectAltName DNS:name (IP:addr for literals), 128-bit random serial,
  // notBefore = max(now - 1h, CA notBefore), notAfter = min(now + 7d, CA
  // notAfter), CA:FALSE, digitalSignature, serverAuth, SKI/AKI, ECDSA-SHA256.
  // A cached leaf past 80% of its lifetime is re-minted. Thread-safe.
  // Throws std::invalid_argument for an invalid name (see canonical_leaf_name)
  // and std::runtime_error when minting fails (e.g. the CA has expired).
  // `owner` (a session) is charged for a leaf it has minted: past the cache's
  // capacity the owner with the most leaves loses its least recently used
  // one (issue 32), so a guest cycling names evicts its own leaves, never
  // another session's (which would then pay to mint them again).
  std::shared_ptr<const LeafCert> leaf_for(const std::string& name, const std::string& owner = "");
  // The cached, fresh leaf for `name`, or null (not cached, stale, or an
  // invalid name): never mints, so it may run on an I/O loop. A miss is
  // minted with leaf_for on a worker.
  std::shared_ptr<const LeafCert> cached(const std::string& name);

  struct Stats {
    std::uint64_t hits = 0;       // served from the cache
    std::uint64_t misses = 0;     // minted: not cached, or cached but stale
    std::uint64_t evictions = 0;  // dropped to stay within cache_capacity
  };
  Stats stats() const;

  X509* ca_cert() const { return ca_cert_.get(); }
  // The key every leaf carries (public half in each leaf certificate).
  EVP_PKEY* leaf_key() const { return leaf_key_.get(); }

 private:
  using Lru = std::list<std::string>;  // most recently used first

  std::shared_ptr<const LeafCert> mint(const LeafName& name, std::time_t now) const;
  std::shared_ptr<const LeafCert> cached_locked(const std::string& canonical, std::time_t now);
  bool fresh(const LeafCert& leaf, std::time_t now) const;

  X509Ptr ca_cert_;
  // Checks the CA (certificate and ca_key_ match, a CA, not expired) and
  // prepares what every leaf shares. `key_name` names the key in errors.
  void init(const std::string& ca_cert_path, const std::string& key_name);

  EvpPkeyPtr ca_key_;
  EvpPkeyPtr leaf_key_;
  EvpPkeyPtr cert_public_key_;  // leaf_key_'s public half, for X509_set_pubkey (see .cpp)
  std::time_t ca_not_before_ = 0;
  std::time_t ca_not_after_ = 0;
  // Extensions shared by every leaf, encoded once: basicConstraints,
  // keyUsage, extendedKeyUsage, subjectKeyIdentifier, authorityKeyIdentifier.
  struct SharedExtensions;
  std::unique_ptr<SharedExtensions> shared_ext_;
  std::size_t capacity_;
  Clock clock_;

  mutable std::mutex mu_;
  Lru lru_;
  struct Entry {
    std::shared_ptr<const LeafCert> leaf;
    Lru::iterator at;
    std::string owner;
  };
  void evict_one_locked();  // the least recently used leaf of the owner with the most
  std::unordered_map<std::string, Entry> cache_;
  std::unordered_map<std::string, std::size_t> owned_;  // leaves cached per owner (none: no entry)
  Stats stats_;
};

}  // namespace zn::proxy
