// The two TLS sides of an intercepted connection:
//  - guest-facing: the proxy is the server, presenting a leaf minted for the
//    SNI (leaf_certs.h) and chained to the deployment CA the guest trusts;
//  - upstream: the proxy is a client that verifies the real server against
//    the system trust store (plus an optional extra bundle) and its name.
// Both speak TLS >= 1.2; the upstream side HTTP/1.1 only (ALPN), the guest
// side HTTP/2 too when asked (every stream becomes an HTTP/1.1 request the
// proxy reads and rewrites).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "userspace/tls/leaf_certs.h"

namespace zn::proxy {

using SslCtxPtr = std::unique_ptr<SSL_CTX, OpensslDeleter<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, OpensslDeleter<SSL, SSL_free>>;

// Server context for guest connections: TLS >= 1.2, no session tickets or
// session cache. ALPN answers "h2" when `http2` and the client offers it,
// else "http/1.1" when offered, else nothing (a client offering only h2 to
// a proxy without http2 gets no ALPN and, if it proceeds, speaks HTTP/1.1).
// It carries no certificate: call use_leaf on each SSL before its
// handshake. Throws std::runtime_error.
SslCtxPtr make_guest_facing_ctx(bool http2 = false);

// Sets the leaf certificate, its key and the chain on one guest-facing SSL:
// the CA certificate too when it is not a self-signed root (a root is the
// guest's trust anchor, not sent). Throws std::runtime_error.
void use_leaf(SSL* ssl, const LeafCert& leaf, X509* ca);

// Client context for upstream connections.
class UpstreamTls {
 public:
  explicit UpstreamTls(SslCtxPtr ctx) : ctx_(std::move(ctx)) {}
  SSL_CTX* get() const { return ctx_.get(); }

 private:
  SslCtxPtr ctx_;
};

// TLS >= 1.2, SSL_VERIFY_PEER against the system default trust paths plus
// the PEM bundle at extra_bundle_path when not empty (throws
// std::runtime_error if it cannot be read or holds no certificate); ALPN
// offers "http/1.1" only; keeps sessions for resumption (session_cache.h).
UpstreamTls make_upstream_ctx(const std::string& extra_bundle_path);

// Per-connection setup of an upstream SSL (before SSL_connect): SNI and
// certificate name check for a DNS name, or an IP address check (and no
// SNI, RFC 6066) for an IPv4/IPv6 literal. A certificate for another name
// fails the handshake. Throws std::invalid_argument for an invalid host.
void prepare_upstream(SSL* ssl, const std::string& host);

// Per connection, before SSL_connect: offer "h2" before "http/1.1" (the
// context offers HTTP/1.1 only). Throws std::runtime_error if OpenSSL
// refuses.
void offer_upstream_alpn(SSL* ssl);
// After the handshake: the upstream chose "h2".
bool upstream_chose_h2(const SSL* ssl);

}  // namespace zn::proxy
