// A TLS handshake between two SSL objects over an in-memory BIO pair (no
// sockets): each side is driven in turn until both finish or one fails.
// The TLS unit tests' one way to run a real handshake.
#pragma once

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <utility>

namespace zn::test {

// true when both sides completed the handshake. The BIO pair is owned by
// the two SSLs from here on.
inline bool handshake_over_bio_pair(SSL* client, SSL* server) {
  BIO* cbio = nullptr;
  BIO* sbio = nullptr;
  BIO_new_bio_pair(&cbio, 0, &sbio, 0);
  SSL_set_bio(client, cbio, cbio);
  SSL_set_bio(server, sbio, sbio);
  SSL_set_connect_state(client);
  SSL_set_accept_state(server);
  bool cdone = false, sdone = false, failed = false;
  for (int i = 0; i < 50 && !(cdone && sdone) && !failed; ++i) {
    for (auto [ssl, done] : {std::pair{client, &cdone}, std::pair{server, &sdone}}) {
      if (*done || failed) continue;
      const int rc = SSL_do_handshake(ssl);
      if (rc == 1) {
        *done = true;
      } else {
        const int err = SSL_get_error(ssl, rc);
        failed = err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE;
      }
    }
  }
  ERR_clear_error();
  return cdone && sdone;
}

}  // namespace zn::test
