// Real ClientHellos for tests: the bytes an OpenSSL client writes first
// into a memory BIO, with the name, ALPN list and versions a test asks for.
#pragma once

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zn::test {

struct HelloOpts {
  std::optional<std::string> sni;
  std::vector<std::string> alpn;
  int min_version = 0;
  int max_version = 0;
};

// The bytes an OpenSSL client writes first: its ClientHello record(s).
inline std::vector<std::uint8_t> make_client_hello(const HelloOpts& o) {
  using Bytes = std::vector<std::uint8_t>;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  EXPECT_TRUE(ctx);
  if (o.min_version) SSL_CTX_set_min_proto_version(ctx.get(), o.min_version);
  if (o.max_version) SSL_CTX_set_max_proto_version(ctx.get(), o.max_version);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  if (o.sni) {
    EXPECT_EQ(SSL_set_tlsext_host_name(ssl.get(), o.sni->c_str()), 1);
  }
  if (!o.alpn.empty()) {
    Bytes wire;
    for (const auto& p : o.alpn) {
      wire.push_back(static_cast<std::uint8_t>(p.size()));
      wire.insert(wire.end(), p.begin(), p.end());
    }
    EXPECT_EQ(SSL_set_alpn_protos(ssl.get(), wire.data(), static_cast<unsigned>(wire.size())), 0);
  }
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(rbio, -1);
  SSL_set_bio(ssl.get(), rbio, wbio);
  SSL_set_connect_state(ssl.get());
  int rc = SSL_do_handshake(ssl.get());
  EXPECT_EQ(SSL_get_error(ssl.get(), rc), SSL_ERROR_WANT_READ);
  Bytes out(BIO_ctrl_pending(wbio));
  EXPECT_EQ(BIO_read(wbio, out.data(), static_cast<int>(out.size())), static_cast<int>(out.size()));
  ERR_clear_error();
  return out;
}

}  // namespace zn::test
