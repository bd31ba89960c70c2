// Guest-facing and upstream TLS contexts in real handshakes over a BIO pair
// (no network): ALPN is http/1.1 or nothing (h2 first only when asked); the upstream side
// verifies the chain (system store + extra bundle), the name or IP, and
// refuses TLS < 1.2.
#include "userspace/tls/contexts.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "support/tls_bio_pair.h"
#include "userspace/tls/leaf_certs.h"

namespace zn::proxy {
namespace {

struct Outcome {
  bool ok = false;  // both sides completed the handshake
  long verify = -1;
  std::string alpn;          // negotiated, as seen by the client
  int version = 0;           // negotiated protocol version
  std::string server_sni;    // SNI the server received ("" if none)
  std::string client_offer;  // ALPN list the server received (wire form)
};

// Records the client's ALPN offer, then prefers h2 when offered: a server
// that would pick h2 if the proxy ever offered it.
int record_offer_prefer_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                           unsigned inlen, void* arg) {
  static_cast<Outcome*>(arg)->client_offer.assign(reinterpret_cast<const char*>(in), inlen);
  for (const char* want : {"h2", "http/1.1"}) {
    for (unsigned i = 0; i + 1 <= inlen; i += 1 + in[i]) {
      if (std::string(reinterpret_cast<const char*>(in + i + 1), in[i]) == want) {
        *out = in + i + 1;
        *outlen = in[i];
        return SSL_TLSEXT_ERR_OK;
      }
    }
  }
  return SSL_TLSEXT_ERR_NOACK;
}

Outcome run_handshake(SSL* client, SSL* server) {
  Outcome out;
  out.ok = test::handshake_over_bio_pair(client, server);
  out.verify = SSL_get_verify_result(client);
  const unsigned char* proto = nullptr;
  unsigned len = 0;
  SSL_get0_alpn_selected(client, &proto, &len);
  out.alpn.assign(reinterpret_cast<const char*>(proto ? proto : reinterpret_cast<const unsigned char*>("")),
                  len);
  out.version = SSL_version(client);
  const char* sni = SSL_get_servername(server, TLSEXT_NAMETYPE_host_name);
  out.server_sni = sni ? sni : "";
  return out;
}

std::string alpn_wire(const std::vector<std::string>& protos) {
  std::string wire;
  for (const auto& p : protos) wire += static_cast<char>(p.size()) + p;
  return wire;
}

class TlsContextsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    upstream_ca = broker::ensure_deployment_ca(dir.file("upstream-ca"), "test upstream CA");
    other_ca = broker::ensure_deployment_ca(dir.file("other-ca"), "some other CA");
    upstream = std::make_unique<LeafCertAuthority>(upstream_ca.cert, upstream_ca.key);
  }

  // A server presenting a leaf for `cert_name` signed by the upstream CA.
  SslPtr server_for(SSL_CTX* ctx, const std::string& cert_name) {
    SslPtr ssl(SSL_new(ctx));
    use_leaf(ssl.get(), *upstream->leaf_for(cert_name), upstream->ca_cert());
    return ssl;
  }

  // The proxy's upstream client (with `bundle`) against a plain server.
  Outcome upstream_to(const std::string& bundle, const std::string& cert_name, const std::string& host,
                      SSL_CTX* server_ctx = nullptr) {
    SslCtxPtr default_server = make_guest_facing_ctx();
    if (!server_ctx) server_ctx = default_server.get();
    Outcome out;
    SSL_CTX_set_alpn_select_cb(server_ctx, record_offer_prefer_h2, &out);
    UpstreamTls tls = make_upstream_ctx(bundle);
    SslPtr client(SSL_new(tls.get()));
    prepare_upstream(client.get(), host);
    SslPtr server = server_for(server_ctx, cert_name);
    Outcome result = run_handshake(client.get(), server.get());
    result.client_offer = out.client_offer;
    SSL_CTX_set_alpn_select_cb(server_ctx, nullptr, nullptr);
    return result;
  }

  // A guest (trusting the upstream CA) offering `alpn` to the guest-facing ctx.
  Outcome guest_with_alpn(const std::vector<std::string>& alpn, bool http2 = false) {
    SslCtxPtr server_ctx = make_guest_facing_ctx(http2);
    SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()), upstream->ca_cert());
    SslPtr client(SSL_new(client_ctx.get()));
    SSL_set_tlsext_host_name(client.get(), "api.github.com");
    SSL_set1_host(client.get(), "api.github.com");
    if (!alpn.empty()) {
      std::string wire = alpn_wire(alpn);
      EXPECT_EQ(SSL_set_alpn_protos(client.get(), reinterpret_cast<const unsigned char*>(wire.data()),
                                    static_cast<unsigned>(wire.size())),
                0);
    }
    SslPtr server = server_for(server_ctx.get(), "api.github.com");
    return run_handshake(client.get(), server.get());
  }

  test::TempDir dir;
  broker::DeploymentCaPaths upstream_ca;
  broker::DeploymentCaPaths other_ca;
  std::unique_ptr<LeafCertAuthority> upstream;
};

TEST_F(TlsContextsTest, GuestFacingAlpnPicksHttp11Only) {
  struct Case {
    std::vector<std::string> offer;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{{{"h2", "http/1.1"}, "http/1.1"},
                                         {{"http/1.1", "h2"}, "http/1.1"},
                                         {{"http/1.1"}, "http/1.1"},
                                         {{"spdy/3.1", "h2", "http/1.1"}, "http/1.1"},
                                         {{"h2"}, ""},
                                         {{"h2", "h3"}, ""},
                                         {{}, ""}}) {
    Outcome o = guest_with_alpn(c.offer);
    EXPECT_TRUE(o.ok) << alpn_wire(c.offer);
    EXPECT_EQ(o.verify, X509_V_OK);
    EXPECT_EQ(o.alpn, c.expected) << alpn_wire(c.offer);
    EXPECT_EQ(o.server_sni, "api.github.com");
  }
}

// With HTTP/2 on, the proxy picks h2 whenever it is offered, whatever the
// client's order, then http/1.1; nothing else is ever chosen.
TEST_F(TlsContextsTest, GuestFacingAlpnWithHttp2PrefersH2ThenHttp11) {
  struct Case {
    std::vector<std::string> offer;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{{{"h2", "http/1.1"}, "h2"},
                                         {{"http/1.1", "h2"}, "h2"},
                                         {{"http/1.1"}, "http/1.1"},
                                         {{"spdy/3.1", "h2c", "http/1.1"}, "http/1.1"},
                                         {{"h2"}, "h2"},
                                         {{"h2c", "h3"}, ""},
                                         {{"H2"}, ""},
                                         {{}, ""}}) {
    Outcome o = guest_with_alpn(c.offer, true);
    EXPECT_TRUE(o.ok) << alpn_wire(c.offer);
    EXPECT_EQ(o.alpn, c.expected) << alpn_wire(c.offer);
  }
}

TEST_F(TlsContextsTest, GuestFacingRefusesTls11AndHasNoTickets) {
  SslCtxPtr server_ctx = make_guest_facing_ctx();
  EXPECT_EQ(SSL_CTX_get_min_proto_version(server_ctx.get()), TLS1_2_VERSION);
  EXPECT_TRUE(SSL_CTX_get_options(server_ctx.get()) & SSL_OP_NO_TICKET);
  EXPECT_EQ(SSL_CTX_get_num_tickets(server_ctx.get()), 0u);

  SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_security_level(client_ctx.get(), 0);
  SSL_CTX_set_min_proto_version(client_ctx.get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(client_ctx.get(), TLS1_1_VERSION);
  SslPtr client(SSL_new(client_ctx.get()));
  SslPtr server = server_for(server_ctx.get(), "api.github.com");
  EXPECT_FALSE(run_handshake(client.get(), server.get()).ok);
}

TEST_F(TlsContextsTest, UpstreamAcceptsServerWhenExtraBundleHasItsCa) {
  Outcome o = upstream_to(upstream_ca.cert, "api.github.com", "api.github.com");
  EXPECT_TRUE(o.ok);
  EXPECT_EQ(o.verify, X509_V_OK) << X509_verify_cert_error_string(o.verify);
  EXPECT_GE(o.version, TLS1_2_VERSION);
  EXPECT_EQ(o.server_sni, "api.github.com");
  // ALPN: the proxy offers http/1.1 alone, so even an h2-preferring server
  // negotiates http/1.1.
  EXPECT_EQ(o.client_offer, alpn_wire({"http/1.1"}));
  EXPECT_EQ(o.alpn, "http/1.1");
}

TEST_F(TlsContextsTest, UpstreamBundleWithSeveralCertificates) {
  std::string bundle = dir.file("bundle.pem");
  {
    std::ofstream out(bundle);
    for (const auto* path : {&other_ca.cert, &upstream_ca.cert}) {
      std::ifstream in(*path);
      out << in.rdbuf();
    }
  }
  EXPECT_TRUE(upstream_to(bundle, "api.github.com", "api.github.com").ok);
}

TEST_F(TlsContextsTest, UpstreamRejectsUntrustedCa) {
  Outcome none = upstream_to("", "api.github.com", "api.github.com");
  EXPECT_FALSE(none.ok);
  // The server sends its leaf alone (its CA is a root): no issuer is found.
  EXPECT_EQ(none.verify, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY)
      << X509_verify_cert_error_string(none.verify);
  Outcome other = upstream_to(other_ca.cert, "api.github.com", "api.github.com");
  EXPECT_FALSE(other.ok);
  EXPECT_NE(other.verify, X509_V_OK);
}

TEST_F(TlsContextsTest, UpstreamRejectsNameMismatch) {
  Outcome o = upstream_to(upstream_ca.cert, "api.github.com", "evil.example.com");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.verify, X509_V_ERR_HOSTNAME_MISMATCH);
  Outcome parent = upstream_to(upstream_ca.cert, "api.github.com", "github.com");
  EXPECT_FALSE(parent.ok);
  Outcome ip = upstream_to(upstream_ca.cert, "api.github.com", "192.0.2.1");
  EXPECT_FALSE(ip.ok);
}

TEST_F(TlsContextsTest, UpstreamIpLiteralChecksAddressAndSendsNoSni) {
  Outcome o = upstream_to(upstream_ca.cert, "192.0.2.7", "192.0.2.7");
  EXPECT_TRUE(o.ok) << X509_verify_cert_error_string(o.verify);
  EXPECT_EQ(o.server_sni, "");
  Outcome v6 = upstream_to(upstream_ca.cert, "2001:db8::7", "[2001:db8::7]");
  EXPECT_TRUE(v6.ok) << X509_verify_cert_error_string(v6.verify);
  EXPECT_EQ(v6.server_sni, "");

  Outcome wrong = upstream_to(upstream_ca.cert, "192.0.2.7", "192.0.2.8");
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.verify, X509_V_ERR_IP_ADDRESS_MISMATCH);
  // A DNS-name certificate does not satisfy an IP check, nor the reverse.
  EXPECT_FALSE(upstream_to(upstream_ca.cert, "api.github.com", "192.0.2.7").ok);
  EXPECT_FALSE(upstream_to(upstream_ca.cert, "192.0.2.7", "api.github.com").ok);
}

TEST_F(TlsContextsTest, UpstreamRejectsTls11OnlyServer) {
  // A server that can only speak TLS 1.0/1.1 (security level 0 so OpenSSL 3
  // lets it). A permissive client reaches it, proving the server works.
  SslCtxPtr server_ctx(SSL_CTX_new(TLS_server_method()));
  SSL_CTX_set_security_level(server_ctx.get(), 0);
  SSL_CTX_set_min_proto_version(server_ctx.get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(server_ctx.get(), TLS1_1_VERSION);
  {
    SslCtxPtr permissive(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_security_level(permissive.get(), 0);
    SSL_CTX_set_min_proto_version(permissive.get(), TLS1_VERSION);
    SSL_CTX_set_verify(permissive.get(), SSL_VERIFY_PEER, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(permissive.get()), upstream->ca_cert());
    SslPtr client(SSL_new(permissive.get()));
    SslPtr server = server_for(server_ctx.get(), "api.github.com");
    Outcome control = run_handshake(client.get(), server.get());
    EXPECT_TRUE(control.ok) << "control handshake at TLS 1.1 failed";
    EXPECT_EQ(control.version, TLS1_1_VERSION);
  }
  Outcome o = upstream_to(upstream_ca.cert, "api.github.com", "api.github.com", server_ctx.get());
  EXPECT_FALSE(o.ok);
}

TEST_F(TlsContextsTest, UnreadableOrEmptyBundleThrows) {
  std::string missing = dir.file("missing.pem");
  try {
    make_upstream_ctx(missing);
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_upstream_ctx(dir.path().string()), std::runtime_error);  // a directory
  std::string junk = dir.file("junk.pem");
  std::ofstream(junk) << "not a certificate\n";
  EXPECT_THROW(make_upstream_ctx(junk), std::runtime_error);
  std::string empty = dir.file("empty.pem");
  std::ofstream(empty).flush();
  EXPECT_THROW(make_upstream_ctx(empty), std::runtime_error);
  EXPECT_NO_THROW(make_upstream_ctx(""));
  EXPECT_EQ(ERR_peek_error(), 0u);
}

TEST_F(TlsContextsTest, UpstreamContextSettings) {
  UpstreamTls tls = make_upstream_ctx("");
  EXPECT_EQ(SSL_CTX_get_min_proto_version(tls.get()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_verify_mode(tls.get()), SSL_VERIFY_PEER);
  SslPtr ssl(SSL_new(tls.get()));
  EXPECT_THROW(prepare_upstream(ssl.get(), ""), std::invalid_argument);
  EXPECT_THROW(prepare_upstream(ssl.get(), "*.example.com"), std::invalid_argument);
  EXPECT_THROW(prepare_upstream(ssl.get(), "example.com:443"), std::invalid_argument);
  EXPECT_NO_THROW(prepare_upstream(ssl.get(), "Example.COM."));
  EXPECT_STREQ(SSL_get_servername(ssl.get(), TLSEXT_NAMETYPE_host_name), "example.com");
}

}  // namespace
}  // namespace zn::proxy
