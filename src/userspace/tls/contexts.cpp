#include "userspace/tls/contexts.h"

#include "userspace/tls/session_cache.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace zn::proxy {
namespace {

using BioPtr = std::unique_ptr<BIO, OpensslDeleter<BIO, BIO_free_all>>;
using X509InfoStackPtr =
    std::unique_ptr<STACK_OF(X509_INFO),
                    decltype([](STACK_OF(X509_INFO) * s) { sk_X509_INFO_pop_free(s, X509_INFO_free); })>;
using X509StackPtr = std::unique_ptr<STACK_OF(X509), decltype([](STACK_OF(X509) * s) { sk_X509_free(s); })>;

constexpr std::string_view kHttp11 = "http/1.1";
// ALPN wire form: length-prefixed protocol names.
constexpr unsigned char kAlpnHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

// Leave no error on this thread's OpenSSL queue (see leaf_certs.cpp).
[[noreturn]] void context_fail(const std::string& what) {
  ERR_clear_error();
  throw std::runtime_error("tls: " + what);
}

// Picks "http/1.1" from the client's list, or declines ALPN (the handshake
// proceeds without it). OpenSSL has checked the list's framing.
// The client's entry for `protocol`, if it offers it.
bool offered(const unsigned char* in, unsigned inlen, std::string_view protocol, const unsigned char** out,
             unsigned char* outlen) {
  for (unsigned i = 0; i < inlen;) {
    unsigned len = in[i];
    if (i + 1 + len > inlen) break;
    if (std::string_view(reinterpret_cast<const char*>(in + i + 1), len) == protocol) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return true;
    }
    i += 1 + len;
  }
  return false;
}

int select_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                  unsigned inlen, void*) {
  return offered(in, inlen, kHttp11, out, outlen) ? SSL_TLSEXT_ERR_OK : SSL_TLSEXT_ERR_NOACK;
}

// The server's preference, whatever the client's order: h2 (one connection
// for many requests), then HTTP/1.1.
int select_h2_or_http11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                        unsigned inlen, void*) {
  return offered(in, inlen, "h2", out, outlen) || offered(in, inlen, kHttp11, out, outlen)
             ? SSL_TLSEXT_ERR_OK
             : SSL_TLSEXT_ERR_NOACK;
}

void add_bundle(SSL_CTX* ctx, const std::string& path) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    int err = errno;
    context_fail("cannot read upstream CA bundle " + path + ": " + std::strerror(err));
  }
  X509InfoStackPtr infos(PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr));
  if (!infos) context_fail("upstream CA bundle " + path + " is not valid PEM");
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  for (int i = 0; i < sk_X509_INFO_num(infos.get()); ++i) {
    X509* cert = sk_X509_INFO_value(infos.get(), i)->x509;
    if (!cert) continue;
    if (X509_STORE_add_cert(store, cert) != 1)
      context_fail("cannot add a certificate of " + path + " to the trust store");
    ++added;
  }
  if (added == 0) context_fail("upstream CA bundle " + path + " holds no certificate");
}

}  // namespace

SslCtxPtr make_guest_facing_ctx(bool http2) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) context_fail("SSL_CTX_new (guest-facing)");
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1)
    context_fail("guest-facing minimum version");
  // One connection, one handshake: no tickets, no server-side cache, no
  // renegotiation.
  SSL_CTX_set_options(ctx.get(),
                      SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_alpn_select_cb(ctx.get(), http2 ? select_h2_or_http11 : select_http11, nullptr);
  return ctx;
}

void use_leaf(SSL* ssl, const LeafCert& leaf, X509* ca) {
  // A self-signed CA is the guest's trust anchor, which it holds already:
  // sending it (RFC 8446 4.4.2 lets a server omit it) cost every new
  // connection its bytes, their hashing and the client's parsing of them
  // (leaf_cert_bench BM_GuestHandshake: 10-17 % of a full handshake).
  const bool anchor = ca && X509_check_issued(ca, ca) == X509_V_OK;
  X509StackPtr chain(sk_X509_new_null());
  if (!chain || (ca && !anchor && !sk_X509_push(chain.get(), ca))) context_fail("leaf chain");
  // Copies (up-refs) cert, key and chain; checks the key matches the cert.
  if (SSL_use_cert_and_key(ssl, leaf.cert(), leaf.key(), chain.get(), 1) != 1)
    context_fail("setting the leaf certificate");
}

UpstreamTls make_upstream_ctx(const std::string& extra_bundle_path) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) context_fail("SSL_CTX_new (upstream)");
  if (SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION) != 1) context_fail("upstream minimum version");
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) context_fail("loading the system trust store");
  if (!extra_bundle_path.empty()) add_bundle(ctx.get(), extra_bundle_path);
  // SSL_CTX_set_alpn_protos returns 0 on success.
  if (SSL_CTX_set_alpn_protos(ctx.get(), kAlpnHttp11, sizeof(kAlpnHttp11)) != 0)
    context_fail("upstream ALPN");
  enable_session_resumption(ctx.get());
  return UpstreamTls(std::move(ctx));
}

void prepare_upstream(SSL* ssl, const std::string& host) {
  std::string_view h = host;
  // Accept the bracketed IPv6 form of URLs and Host headers.
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  LeafName name = canonical_leaf_name(h);  // throws std::invalid_argument
  if (name.is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.text.c_str()) != 1)
      context_fail("upstream IP check for " + name.text);
    return;
  }
  if (SSL_set_tlsext_host_name(ssl, name.text.c_str()) != 1) context_fail("upstream SNI for " + name.text);
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl, name.text.c_str()) != 1) context_fail("upstream name check for " + name.text);
}

void offer_upstream_alpn(SSL* ssl) {
  static constexpr unsigned char kProtocols[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  // 0 is success here (OpenSSL's ALPN setters invert the usual convention).
  if (SSL_set_alpn_protos(ssl, kProtocols, sizeof(kProtocols)) != 0) context_fail("upstream ALPN");
}

bool upstream_chose_h2(const SSL* ssl) {
  const unsigned char* chosen = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl, &chosen, &length);
  return length == 2 && chosen[0] == 'h' && chosen[1] == '2';
}

}  // namespace zn::proxy
