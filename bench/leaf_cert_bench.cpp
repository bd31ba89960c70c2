// Cost of LeafCertAuthority::leaf_for: a cache hit (lookup + LRU touch)
// against a miss (mint: build and ECDSA-P256-sign one certificate; the key
// is shared, so no key generation). The CA is made in a temporary directory.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <filesystem>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "support/tls_bio_pair.h"
#include "userspace/tls/client_hello.h"
#include "userspace/tls/contexts.h"
#include "userspace/tls/leaf_certs.h"
#include "userspace/tls/ticket_keys.h"

namespace {

using zn::proxy::LeafCertAuthority;

struct Ca {
  zn::test::TempDir dir;
  zn::broker::DeploymentCaPaths paths = zn::broker::ensure_deployment_ca(dir.file("ca"));
};

const Ca& ca() {
  static const Ca instance;
  return instance;
}

std::vector<std::string> names(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back("host" + std::to_string(i) + ".example.com");
  return out;
}

// Hits over a warm cache of 1000 names.
void BM_LeafForHit(benchmark::State& state) {
  LeafCertAuthority authority(ca().paths.cert, ca().paths.key, 1024);
  auto all = names(1000);
  for (const auto& n : all) authority.leaf_for(n);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(authority.leaf_for(all[i]));
    if (++i == all.size()) i = 0;
  }
  state.counters["hits"] = static_cast<double>(authority.stats().hits);
}
BENCHMARK(BM_LeafForHit);

// Every call misses: 2000 names cycling through a 1000-entry cache, so each
// one mints (and evicts the least recently used leaf).
void BM_LeafForMiss(benchmark::State& state) {
  LeafCertAuthority authority(ca().paths.cert, ca().paths.key, 1000);
  auto all = names(2000);
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(authority.leaf_for(all[i]));
    if (++i == all.size()) i = 0;
  }
  auto s = authority.stats();
  state.counters["misses"] = static_cast<double>(s.misses);
  state.counters["hits"] = static_cast<double>(s.hits);
}
BENCHMARK(BM_LeafForMiss);

// Hits from several threads at once (one mutex guards the cache).
void BM_LeafForHitThreads(benchmark::State& state) {
  static std::unique_ptr<LeafCertAuthority> authority;
  static std::vector<std::string> all;
  if (state.thread_index() == 0) {
    authority = std::make_unique<LeafCertAuthority>(ca().paths.cert, ca().paths.key, 1024);
    all = names(1000);
    for (const auto& n : all) authority->leaf_for(n);
  }
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 97;
  for (auto _ : state) {
    benchmark::DoNotOptimize(authority->leaf_for(all[i % all.size()]));
    ++i;
  }
  if (state.thread_index() == 0) authority.reset();
}
BENCHMARK(BM_LeafForHitThreads)->Threads(1)->Threads(2)->Threads(4);

// What a guest connection's TLS setup costs the proxy's loop before any
// byte moves: a new SSL, its leaf (cached) set on it, and freed.
void BM_GuestSslWithLeaf(benchmark::State& state) {
  LeafCertAuthority authority(ca().paths.cert, ca().paths.key, 16);
  const auto leaf = authority.leaf_for("api.example.com");
  const auto ctx = zn::proxy::make_guest_facing_ctx(true);
  for (auto _ : state) {
    zn::proxy::SslPtr ssl(SSL_new(ctx.get()));
    zn::proxy::use_leaf(ssl.get(), *leaf, authority.ca_cert());
    benchmark::DoNotOptimize(ssl.get());
  }
}
BENCHMARK(BM_GuestSslWithLeaf);

// A whole guest-facing full handshake over memory, both sides (the client
// verifies the chain against the CA, and reads the session ticket the
// server sends after it): what OpenSSL itself costs per new connection.
void BM_GuestHandshake(benchmark::State& state) {
  LeafCertAuthority authority(ca().paths.cert, ca().paths.key, 16);
  const auto leaf = authority.leaf_for("api.example.com");
  const auto server_ctx = zn::proxy::make_guest_facing_ctx(true);
  zn::proxy::enable_guest_resumption(server_ctx.get(), zn::proxy::GuestResumption{});
  zn::proxy::SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  X509_STORE_add_cert(SSL_CTX_get_cert_store(client_ctx.get()), authority.ca_cert());
  SSL_CTX_set_verify(client_ctx.get(), SSL_VERIFY_PEER, nullptr);
  for (auto _ : state) {
    zn::proxy::SslPtr server(SSL_new(server_ctx.get()));
    zn::proxy::use_leaf(server.get(), *leaf, authority.ca_cert());
    zn::proxy::bind_guest_session(server.get(), "bench", "api.example.com");
    zn::proxy::SslPtr client(SSL_new(client_ctx.get()));
    SSL_set_tlsext_host_name(client.get(), "api.example.com");
    if (!zn::test::handshake_over_bio_pair(client.get(), server.get()))
      state.SkipWithError("handshake failed");
    char byte = 0;
    SSL_read(client.get(), &byte, 1);
    ERR_clear_error();
  }
}
BENCHMARK(BM_GuestHandshake);

// What reading a new connection's ClientHello costs the loop before its
// decision (proxy: the peek on port 443): a real hello, an OpenSSL client's
// first flight, parsed for its name and ALPN.
void BM_PeekClientHello(benchmark::State& state) {
  zn::proxy::SslCtxPtr client_ctx(SSL_CTX_new(TLS_client_method()));
  zn::proxy::SslPtr client(SSL_new(client_ctx.get()));
  SSL_set_tlsext_host_name(client.get(), "api.example.com");
  static const unsigned char kAlpn[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_set_alpn_protos(client.get(), kAlpn, sizeof kAlpn);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(client.get(), rbio, wbio);  // client owns both
  SSL_set_connect_state(client.get());
  SSL_do_handshake(client.get());  // writes the hello, then wants the server's answer
  ERR_clear_error();
  char* data = nullptr;
  const long n = BIO_get_mem_data(wbio, &data);
  const std::vector<std::uint8_t> hello(reinterpret_cast<std::uint8_t*>(data),
                                        reinterpret_cast<std::uint8_t*>(data) + n);
  for (auto _ : state) {
    const zn::proxy::ClientHelloInfo info = zn::proxy::peek_client_hello(hello);
    if (info.status != zn::proxy::HelloStatus::kOk) state.SkipWithError("hello not read");
    benchmark::DoNotOptimize(info.sni);
  }
}
BENCHMARK(BM_PeekClientHello);

}  // namespace

BENCHMARK_MAIN();
