// Leaf minting from a real deployment CA (broker::ensure_deployment_ca in a
// temporary directory): the certificate's fields, real TLS handshakes over a
// BIO pair against a client that trusts only the CA, the LRU cache, re-mint
// near expiry (injected clock), concurrency and CA loading errors.
#include "userspace/tls/leaf_certs.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "support/tls_bio_pair.h"
#include "userspace/tls/contexts.h"

namespace zn::proxy {
namespace {

std::time_t to_time_t(const ASN1_TIME* t) {
  struct tm tm {};
  EXPECT_EQ(ASN1_TIME_to_tm(t, &tm), 1);
  return timegm(&tm);
}

std::string common_name(X509* x) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, sizeof(buf));
  return buf;
}

struct Handshake {
  bool ok = false;      // both sides completed
  long verify = -1;     // client's verify result
  std::string version;  // negotiated protocol
  int sent_chain = -1;  // certificates the server sent
};

// Client trusting only `ca`, checking `host` (DNS name or IP literal), against
// a guest-facing server presenting `leaf` chained to `ca`.
Handshake connect_to_leaf(const LeafCert& leaf, X509* ca, const std::string& host, bool ip = false) {
  SslCtxPtr server_ctx = make_guest_facing_ctx();
  SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()), ca);
  SslPtr server(SSL_new(server_ctx.get()));
  SslPtr client(SSL_new(client_ctx.get()));
  use_leaf(server.get(), leaf, ca);
  if (ip) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(client.get()), host.c_str());
  } else {
    SSL_set_tlsext_host_name(client.get(), host.c_str());
    SSL_set1_host(client.get(), host.c_str());
  }
  const bool ok = test::handshake_over_bio_pair(client.get(), server.get());
  STACK_OF(X509)* sent = SSL_get_peer_cert_chain(client.get());
  return {ok, SSL_get_verify_result(client.get()), SSL_get_version(client.get()),
          sent ? sk_X509_num(sent) : -1};
}

class LeafCertsTest : public ::testing::Test {
 protected:
  void SetUp() override { ca = broker::ensure_deployment_ca(dir.file("ca")); }
  test::TempDir dir;
  broker::DeploymentCaPaths ca;
};

TEST_F(LeafCertsTest, LeafForDnsNameVerifiesWithHostnameCheck) {
  LeafCertAuthority authority(ca.cert, ca.key);
  auto leaf = authority.leaf_for("api.github.com");
  ASSERT_TRUE(leaf && leaf->cert() && leaf->key());
  Handshake h = connect_to_leaf(*leaf, authority.ca_cert(), "api.github.com");
  EXPECT_TRUE(h.ok);
  EXPECT_EQ(h.verify, X509_V_OK) << X509_verify_cert_error_string(h.verify);
  // The leaf alone: the deployment CA is the guest's own trust anchor.
  EXPECT_EQ(h.sent_chain, 1);

  Handshake wrong = connect_to_leaf(*leaf, authority.ca_cert(), "github.com");
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.verify, X509_V_ERR_HOSTNAME_MISMATCH);
  Handshake sub = connect_to_leaf(*leaf, authority.ca_cert(), "x.api.github.com");
  EXPECT_FALSE(sub.ok);
}

TEST_F(LeafCertsTest, LeafForIpLiteralCarriesIpSan) {
  LeafCertAuthority authority(ca.cert, ca.key);
  for (const std::string ip : {"192.0.2.7", "2001:db8::1"}) {
    auto leaf = authority.leaf_for(ip);
    EXPECT_EQ(X509_check_ip_asc(leaf->cert(), ip.c_str(), 0), 1) << ip;
    // No DNS SAN (OpenSSL would still match the CN, which browsers ignore).
    EXPECT_NE(X509_check_host(leaf->cert(), ip.c_str(), 0, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr), 1)
        << ip;
    Handshake h = connect_to_leaf(*leaf, authority.ca_cert(), ip, /*ip=*/true);
    EXPECT_TRUE(h.ok) << ip << ": " << X509_verify_cert_error_string(h.verify);
  }
  auto leaf = authority.leaf_for("192.0.2.7");
  Handshake other = connect_to_leaf(*leaf, authority.ca_cert(), "192.0.2.8", /*ip=*/true);
  EXPECT_FALSE(other.ok);
  EXPECT_EQ(other.verify, X509_V_ERR_IP_ADDRESS_MISMATCH);
  // The same address spelled differently is the same leaf.
  EXPECT_EQ(authority.leaf_for("2001:DB8:0::1"), authority.leaf_for("2001:db8::1"));
}

TEST_F(LeafCertsTest, CertificateFields) {
  LeafCertAuthority authority(ca.cert, ca.key);
  auto leaf = authority.leaf_for("api.github.com");
  X509* x = leaf->cert();
  X509* issuer = authority.ca_cert();
  EXPECT_EQ(X509_get_version(x), X509_VERSION_3);
  EXPECT_EQ(common_name(x), "api.github.com");
  EXPECT_EQ(X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(issuer)), 0);
  EXPECT_EQ(X509_check_issued(issuer, x), X509_V_OK);
  EXPECT_EQ(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
  EXPECT_EQ(X509_verify(x, X509_get0_pubkey(issuer)), 1);

  uint32_t flags = X509_get_extension_flags(x);
  EXPECT_FALSE(flags & EXFLAG_CA);
  EXPECT_TRUE(flags & EXFLAG_BCONS);
  EXPECT_EQ(X509_get_key_usage(x), static_cast<uint32_t>(KU_DIGITAL_SIGNATURE));
  EXPECT_EQ(X509_get_extended_key_usage(x), static_cast<uint32_t>(XKU_SSL_SERVER));
  ASSERT_NE(X509_get0_subject_key_id(x), nullptr);
  ASSERT_NE(X509_get0_authority_key_id(x), nullptr);
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x), X509_get0_subject_key_id(issuer)), 0);

  // SAN: exactly one DNS entry.
  auto* sans = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr));
  ASSERT_NE(sans, nullptr);
  ASSERT_EQ(sk_GENERAL_NAME_num(sans), 1);
  int type = 0;
  auto* dns = static_cast<ASN1_IA5STRING*>(GENERAL_NAME_get0_value(sk_GENERAL_NAME_value(sans, 0), &type));
  EXPECT_EQ(type, GEN_DNS);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)), ASN1_STRING_length(dns)),
            "api.github.com");
  GENERAL_NAMES_free(sans);

  // Serial: positive, at most 128 bits, different per leaf.
  BIGNUM* s1 = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr);
  BIGNUM* s2 = ASN1_INTEGER_to_BN(X509_get0_serialNumber(authority.leaf_for("example.com")->cert()), nullptr);
  EXPECT_FALSE(BN_is_negative(s1));
  EXPECT_LE(BN_num_bits(s1), 128);
  EXPECT_GT(BN_num_bits(s1), 64);  // fails with probability 2^-64
  EXPECT_NE(BN_cmp(s1, s2), 0);
  BN_free(s1);
  BN_free(s2);
}

TEST_F(LeafCertsTest, AllLeavesShareOneKey) {
  LeafCertAuthority authority(ca.cert, ca.key);
  auto a = authority.leaf_for("a.example");
  auto b = authority.leaf_for("b.example");
  EXPECT_EQ(a->key(), b->key());
  EXPECT_EQ(a->key(), authority.leaf_key());
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(a->cert()), X509_get0_pubkey(b->cert())), 1);
  EXPECT_EQ(X509_check_private_key(b->cert(), a->key()), 1);
  EXPECT_NE(EVP_PKEY_eq(X509_get0_pubkey(a->cert()), X509_get0_pubkey(authority.ca_cert())), 1);
}

TEST_F(LeafCertsTest, ValidityWithinCaValidity) {
  LeafCertAuthority authority(ca.cert, ca.key);
  auto leaf = authority.leaf_for("api.github.com");
  std::time_t now = std::time(nullptr);
  std::time_t nb = to_time_t(X509_get0_notBefore(leaf->cert()));
  std::time_t na = to_time_t(X509_get0_notAfter(leaf->cert()));
  EXPECT_EQ(nb, leaf->not_before());
  EXPECT_EQ(na, leaf->not_after());
  EXPECT_GE(nb, to_time_t(X509_get0_notBefore(authority.ca_cert())));
  EXPECT_LE(na, to_time_t(X509_get0_notAfter(authority.ca_cert())));
  EXPECT_NEAR(static_cast<double>(nb), static_cast<double>(now - 3600), 5);
  EXPECT_NEAR(static_cast<double>(na), static_cast<double>(now + 7 * 86400), 5);
}

TEST_F(LeafCertsTest, NotAfterClampedToCaAndExpiredCaRefused) {
  X509Ptr ca_cert;
  {
    FILE* f = std::fopen(ca.cert.c_str(), "r");
    ca_cert.reset(PEM_read_X509(f, nullptr, nullptr, nullptr));
    std::fclose(f);
  }
  std::time_t ca_end = to_time_t(X509_get0_notAfter(ca_cert.get()));
  std::atomic<std::time_t> now{ca_end - 86400};
  LeafCertAuthority authority(ca.cert, ca.key, 16, [&] { return now.load(); });
  auto leaf = authority.leaf_for("api.github.com");
  EXPECT_EQ(leaf->not_after(), ca_end);
  EXPECT_EQ(to_time_t(X509_get0_notAfter(leaf->cert())), ca_end);
  EXPECT_EQ(leaf->not_before(), ca_end - 86400 - 3600);

  now = ca_end + 1;
  EXPECT_THROW(authority.leaf_for("other.example"), std::runtime_error);
  EXPECT_THROW(LeafCertAuthority(ca.cert, ca.key, 16, [&] { return now.load(); }), std::runtime_error);
}

// The loop's lookup never mints: a miss, a stale leaf and an invalid name are
// null (minted on a worker with leaf_for); a fresh cached leaf is a hit.
TEST_F(LeafCertsTest, CachedNeverMints) {
  std::atomic<std::time_t> now{std::time(nullptr)};
  LeafCertAuthority authority(ca.cert, ca.key, 16, [&] { return now.load(); });
  EXPECT_EQ(authority.cached("api.github.com"), nullptr);
  EXPECT_EQ(authority.cached("*.bad"), nullptr);
  EXPECT_EQ(authority.stats().misses, 0u);
  auto leaf = authority.leaf_for("api.github.com");
  EXPECT_EQ(authority.cached("API.github.com."), leaf);
  now = leaf->not_after();  // stale: past 80% of its lifetime
  EXPECT_EQ(authority.cached("api.github.com"), nullptr);
  auto s = authority.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
}

TEST_F(LeafCertsTest, ReMintedPastEightyPercentOfLifetime) {
  std::atomic<std::time_t> now{std::time(nullptr)};
  LeafCertAuthority authority(ca.cert, ca.key, 16, [&] { return now.load(); });
  const std::time_t start = now;
  auto first = authority.leaf_for("api.github.com");
  std::time_t lifetime = first->not_after() - first->not_before();  // 7d + 1h
  now = first->not_before() + lifetime * 8 / 10 - 1;
  EXPECT_EQ(authority.leaf_for("api.github.com"), first);
  now = first->not_before() + lifetime * 8 / 10 + 1;
  auto second = authority.leaf_for("api.github.com");
  EXPECT_NE(second, first);
  EXPECT_GT(second->not_after(), first->not_after());
  EXPECT_EQ(authority.leaf_for("api.github.com"), second);
  // A clock stepped back before notBefore re-mints too.
  now = start - 2 * 3600;
  EXPECT_NE(authority.leaf_for("api.github.com"), second);
  auto s = authority.stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.evictions, 0u);
  // The first leaf is still usable by whoever holds it.
  EXPECT_EQ(common_name(first->cert()), "api.github.com");
}

TEST_F(LeafCertsTest, CacheHitsReturnSamePointerAndCount) {
  LeafCertAuthority authority(ca.cert, ca.key);
  auto a = authority.leaf_for("api.github.com");
  auto b = authority.leaf_for("api.github.com");
  auto c = authority.leaf_for("API.GitHub.com.");  // same canonical name
  auto d = authority.leaf_for("github.com");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_NE(a, d);
  auto s = authority.stats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.evictions, 0u);
}

TEST_F(LeafCertsTest, LruEvictionAtCapacity) {
  LeafCertAuthority authority(ca.cert, ca.key, 2);
  auto a = authority.leaf_for("a.example");
  auto b = authority.leaf_for("b.example");
  EXPECT_EQ(authority.leaf_for("a.example"), a);  // a is now most recent
  auto c = authority.leaf_for("c.example");       // evicts b
  auto s = authority.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.misses, 3u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(authority.leaf_for("a.example"), a);
  EXPECT_EQ(authority.leaf_for("c.example"), c);
  auto b2 = authority.leaf_for("b.example");  // re-minted, evicts a
  EXPECT_NE(b2, b);
  s = authority.stats();
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.hits, 3u);
  // An evicted leaf stays valid for its holders.
  EXPECT_EQ(common_name(b->cert()), "b.example");
  EXPECT_THROW(LeafCertAuthority(ca.cert, ca.key, 0), std::invalid_argument);
}

// Issue 32: past the capacity the owner with the most leaves loses its
// least recently used one, so a session cycling names evicts only its own.
// The control: the same names minted with no owner evict the quiet
// session's leaves (plain LRU).
TEST_F(LeafCertsTest, ASessionCyclingNamesEvictsOnlyItsOwnLeaves) {
  auto quiet_survives = [&](bool owned) {
    LeafCertAuthority authority(ca.cert, ca.key, 4);
    authority.leaf_for("b1.example", owned ? "quiet" : "");
    authority.leaf_for("b2.example", owned ? "quiet" : "");
    for (int i = 0; i < 10; ++i)
      authority.leaf_for("a" + std::to_string(i) + ".example", owned ? "noisy" : "");
    EXPECT_EQ(authority.stats().evictions, 8u);
    // The noisy session keeps its most recent leaves within what is left.
    EXPECT_NE(authority.cached("a9.example"), nullptr);
    return authority.cached("b1.example") != nullptr && authority.cached("b2.example") != nullptr;
  };
  EXPECT_TRUE(quiet_survives(true));
  EXPECT_FALSE(quiet_survives(false));
  // Shares even out: a third owner's leaves push out the largest owner's.
  LeafCertAuthority authority(ca.cert, ca.key, 4);
  for (int i = 0; i < 4; ++i) authority.leaf_for("a" + std::to_string(i) + ".example", "noisy");
  authority.leaf_for("c1.example", "third");
  authority.leaf_for("c2.example", "third");
  EXPECT_NE(authority.cached("c1.example"), nullptr);
  EXPECT_EQ(authority.cached("a0.example"), nullptr);  // the noisy session's oldest went first
  EXPECT_EQ(authority.cached("a1.example"), nullptr);
  EXPECT_NE(authority.cached("a3.example"), nullptr);
}

TEST_F(LeafCertsTest, ConcurrentLeafForIsSafe) {
  LeafCertAuthority authority(ca.cert, ca.key, 8);  // small: evictions race with hits
  constexpr int kThreads = 4;
  constexpr int kCalls = 300;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        std::string name = "h" + std::to_string((i * 7 + t) % 12) + ".example.com";
        auto leaf = authority.leaf_for(name);
        if (!leaf || X509_check_host(leaf->cert(), name.c_str(), 0, 0, nullptr) != 1 ||
            X509_verify(leaf->cert(), X509_get0_pubkey(authority.ca_cert())) != 1)
          ++wrong;
        // Now and then a full handshake: the shared key in use on threads.
        if (i % 50 == 0 && !connect_to_leaf(*leaf, authority.ca_cert(), name).ok) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  auto s = authority.stats();
  EXPECT_EQ(s.hits + s.misses, static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_GE(s.misses, 12u);
  EXPECT_GE(s.evictions, 4u);
  // Still serves verifiable leaves afterwards.
  auto leaf = authority.leaf_for("api.github.com");
  EXPECT_TRUE(connect_to_leaf(*leaf, authority.ca_cert(), "api.github.com").ok);
}

TEST_F(LeafCertsTest, LongNameRidesInCriticalSanWithoutCn) {
  LeafCertAuthority authority(ca.cert, ca.key);
  std::string name = std::string(60, 'a') + "." + std::string(60, 'b') + ".example.com";
  auto leaf = authority.leaf_for(name);
  EXPECT_EQ(common_name(leaf->cert()), "");
  int crit = -1;
  void* san = X509_get_ext_d2i(leaf->cert(), NID_subject_alt_name, &crit, nullptr);
  EXPECT_EQ(crit, 1);
  GENERAL_NAMES_free(static_cast<GENERAL_NAMES*>(san));
  EXPECT_TRUE(connect_to_leaf(*leaf, authority.ca_cert(), name).ok);
}

TEST(LeafName, Canonicalization) {
  EXPECT_EQ(canonical_leaf_name("API.GitHub.com.").text, "api.github.com");
  EXPECT_FALSE(canonical_leaf_name("api.github.com").is_ip);
  EXPECT_EQ(canonical_leaf_name("localhost").text, "localhost");
  EXPECT_EQ(canonical_leaf_name("_dmarc.example.com").text, "_dmarc.example.com");
  EXPECT_EQ(canonical_leaf_name("xn--bcher-kva.example").text, "xn--bcher-kva.example");
  auto v4 = canonical_leaf_name("10.1.2.3");
  EXPECT_TRUE(v4.is_ip);
  EXPECT_EQ(v4.text, "10.1.2.3");
  auto v6 = canonical_leaf_name("2001:0DB8:0:0::1");
  EXPECT_TRUE(v6.is_ip);
  EXPECT_EQ(v6.text, "2001:db8::1");
}

TEST(LeafName, RejectsInvalidNames) {
  const std::string label63(63, 'a');
  for (const std::string& bad :
       std::vector<std::string>{"",
                                ".",
                                "*.example.com",
                                "a..b",
                                ".a.b",
                                "-a.example",
                                "a-.example",
                                "a b.example",
                                "example.com:443",
                                "[::1]",
                                "127.1",
                                "0x7f000001",
                                "10.0.0.300",
                                "host.123",
                                "fe80::1%eth0",
                                "ex\xc3\xa4mple.com",
                                std::string("a\0b", 3),
                                "a/b",
                                std::string(64, 'a') + ".example",
                                label63 + "." + label63 + "." + label63 + "." + label63}) {
    EXPECT_THROW(canonical_leaf_name(bad), std::invalid_argument) << bad;
  }
}

TEST_F(LeafCertsTest, InvalidNameThrowsAndCachesNothing) {
  LeafCertAuthority authority(ca.cert, ca.key);
  EXPECT_THROW(authority.leaf_for("*.github.com"), std::invalid_argument);
  EXPECT_THROW(authority.leaf_for("github.com,DNS:evil.com"), std::invalid_argument);
  auto s = authority.stats();
  EXPECT_EQ(s.hits + s.misses, 0u);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST_F(LeafCertsTest, CaLoadingErrorsAreClearAndNeverShowKeyBytes) {
  auto other = broker::ensure_deployment_ca(dir.file("other"));
  std::string missing = dir.file("missing.pem");

  std::string e = error_of([&] { LeafCertAuthority{missing, ca.key}; });
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  e = error_of([&] { LeafCertAuthority{ca.cert, missing}; });
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  e = error_of([&] { LeafCertAuthority{ca.key, ca.key}; });  // a key is not a certificate
  EXPECT_NE(e.find("certificate"), std::string::npos) << e;
  e = error_of([&] { LeafCertAuthority{ca.cert, ca.cert}; });  // a certificate is not a key
  EXPECT_NE(e.find("private key"), std::string::npos) << e;
  e = error_of([&] { LeafCertAuthority{ca.cert, other.key}; });
  EXPECT_NE(e.find("does not match"), std::string::npos) << e;

  // A leaf (CA:FALSE) with its key cannot act as the CA.
  LeafCertAuthority authority(ca.cert, ca.key);
  auto leaf = authority.leaf_for("api.github.com");
  std::string leaf_cert = dir.file("leaf.pem");
  std::string leaf_key = dir.file("leaf.key");
  FILE* f = std::fopen(leaf_cert.c_str(), "w");
  PEM_write_X509(f, leaf->cert());
  std::fclose(f);
  f = std::fopen(leaf_key.c_str(), "w");
  PEM_write_PrivateKey(f, leaf->key(), nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  e = error_of([&] { LeafCertAuthority{leaf_cert, leaf_key}; });
  EXPECT_NE(e.find("not a CA"), std::string::npos) << e;

  for (const auto& msg : {error_of([&] {
                            LeafCertAuthority{ca.cert, ca.cert};
                          }),
                          error_of([&] {
                            LeafCertAuthority{ca.cert, other.key};
                          })}) {
    EXPECT_EQ(msg.find("BEGIN"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("PRIVATE KEY-----"), std::string::npos) << msg;
  }
  EXPECT_EQ(ERR_peek_error(), 0u) << "no OpenSSL error left on the thread's queue";
}

}  // namespace
}  // namespace zn::proxy
