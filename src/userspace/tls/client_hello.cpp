#include "userspace/tls/client_hello.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>

#include <exception>
#include <memory>
#include <stdexcept>

namespace zn::proxy {
namespace {

constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kMaxRecordPayload = 16384;  // 2^14, RFC 8446 5.1
constexpr std::uint8_t kHandshake = 22;
constexpr unsigned kExtSupportedVersions = 43;

// Bounds-checked reader over extension bytes handed out by OpenSSL. Every
// length inside an extension is attacker-controlled: nothing is read past the
// span, and a short read poisons the reader.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> data) : data_(data) {}
  bool u8(std::size_t& out) {
    if (data_.size() < 1) return false;
    out = data_[0];
    data_ = data_.subspan(1);
    return true;
  }
  bool u16(std::size_t& out) {
    if (data_.size() < 2) return false;
    out = (std::size_t{data_[0]} << 8) | data_[1];
    data_ = data_.subspan(2);
    return true;
  }
  bool bytes(std::size_t n, std::span<const std::uint8_t>& out) {
    if (data_.size() < n) return false;
    out = data_.first(n);
    data_ = data_.subspan(n);
    return true;
  }
  // A vector<..> with a u8/u16 length prefix that must be exactly the rest.
  bool rest_prefixed(bool wide, std::span<const std::uint8_t>& out) {
    std::size_t n = 0;
    if (!(wide ? u16(n) : u8(n))) return false;
    return n == data_.size() && bytes(n, out);
  }
  bool empty() const { return data_.empty(); }

 private:
  std::span<const std::uint8_t> data_;
};

bool hostname_char_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == ':';
}

bool all_of_digits(std::string_view s, bool hex) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (hex && ((c >= 'a' && c <= 'f')));
    if (!ok) return false;
  }
  return true;
}

bool looks_like_ip_literal(std::string_view host) {
  std::string h(host);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty()) return false;
  in6_addr a6{};
  in_addr a4{};
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) return true;
  if (inet_aton(h.c_str(), &a4) != 0) return true;  // also "127.1", "0x7f.1"
  // A numeric last label is never a DNS name anyone registers; resolvers
  // that take it for an address would bypass the name-based policy.
  std::string_view last(h);
  if (auto dot = last.rfind('.'); dot != std::string_view::npos) last = last.substr(dot + 1);
  if (all_of_digits(last, false)) return true;
  if (last.size() > 2 && last[0] == '0' && last[1] == 'x' && all_of_digits(last.substr(2), true)) return true;
  return false;
}

// server_name (RFC 6066 3): ServerNameList with exactly one host_name entry,
// as OpenSSL itself requires.
bool parse_server_name(std::span<const std::uint8_t> ext, ClientHelloInfo& info) {
  Reader r(ext);
  std::span<const std::uint8_t> list;
  if (!r.rest_prefixed(true, list)) return false;
  Reader lr(list);
  std::size_t type = 0;
  std::span<const std::uint8_t> name;
  if (!lr.u8(type) || type != TLSEXT_NAMETYPE_host_name) return false;
  if (!lr.rest_prefixed(true, name)) return false;  // one entry, no trailer
  if (name.empty() || name.size() > 255) return false;
  std::string host;
  host.reserve(name.size());
  for (std::uint8_t b : name) {
    unsigned char c = b;
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    if (!hostname_char_ok(c)) return false;  // NUL, controls, non-ASCII, ...
    host.push_back(static_cast<char>(c));
  }
  info.sni_is_ip_literal = looks_like_ip_literal(host);
  info.sni = std::move(host);
  return true;
}

// ALPN (RFC 7301 3.1): non-empty list of non-empty protocol names.
bool parse_alpn(std::span<const std::uint8_t> ext, ClientHelloInfo& info) {
  Reader r(ext);
  std::span<const std::uint8_t> list;
  if (!r.rest_prefixed(true, list) || list.empty()) return false;
  Reader lr(list);
  while (!lr.empty()) {
    std::size_t n = 0;
    std::span<const std::uint8_t> proto;
    if (!lr.u8(n) || n == 0 || !lr.bytes(n, proto)) return false;
    info.alpn.emplace_back(proto.begin(), proto.end());
  }
  return true;
}

// supported_versions in a ClientHello (RFC 8446 4.2.1): u8-prefixed, 2..254.
bool parse_supported_versions(std::span<const std::uint8_t> ext, ClientHelloInfo& info) {
  Reader r(ext);
  std::span<const std::uint8_t> list;
  if (!r.rest_prefixed(false, list) || list.size() < 2 || list.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < list.size(); i += 2)
    info.supported_versions.push_back(static_cast<std::uint16_t>((list[i] << 8) | list[i + 1]));
  return true;
}

struct Capture {
  bool fired = false;
  bool valid = false;
  ClientHelloInfo info;
  std::exception_ptr error;  // never let an exception cross OpenSSL's frames
};

bool get_ext(SSL* ssl, unsigned type, std::span<const std::uint8_t>& out) {
  const unsigned char* p = nullptr;
  std::size_t len = 0;
  if (SSL_client_hello_get0_ext(ssl, type, &p, &len) != 1) return false;
  out = std::span<const std::uint8_t>(p, p == nullptr ? 0 : len);
  return true;
}

bool extract(SSL* ssl, ClientHelloInfo& info) {
  info.legacy_version = static_cast<std::uint16_t>(SSL_client_hello_get0_legacy_version(ssl));
  std::span<const std::uint8_t> ext;
  if (get_ext(ssl, TLSEXT_TYPE_server_name, ext) && !parse_server_name(ext, info)) return false;
  if (get_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, ext) && !parse_alpn(ext, info))
    return false;
  if (get_ext(ssl, kExtSupportedVersions, ext) && !parse_supported_versions(ext, info)) return false;
  return true;
}

int on_client_hello(SSL* ssl, int* alert, void* /*arg*/) {
  *alert = SSL_AD_HANDSHAKE_FAILURE;
  auto* cap = static_cast<Capture*>(SSL_get_app_data(ssl));
  if (cap == nullptr) return SSL_CLIENT_HELLO_ERROR;
  cap->fired = true;
  try {
    cap->valid = extract(ssl, cap->info);
  } catch (...) {
    cap->error = std::current_exception();
  }
  // Always abort: we only peek. Nothing is sent (the write BIO is a null BIO
  // and nobody reads it anyway).
  return SSL_CLIENT_HELLO_ERROR;
}

SSL_CTX* shared_ctx() {
  static SSL_CTX* const ctx = [] {
    SSL_CTX* c = SSL_CTX_new(TLS_server_method());
    if (c == nullptr) throw std::runtime_error("client_hello: SSL_CTX_new failed");
    // Parse whatever the guest offers; version/cipher policy is not decided
    // here (the callback runs before negotiation anyway).
    SSL_CTX_set_min_proto_version(c, 0);
    SSL_CTX_set_security_level(c, 0);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_client_hello_cb(c, on_client_hello, nullptr);
    ERR_clear_error();
    return c;
  }();
  return ctx;
}

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

// Leave the thread's OpenSSL error queue as we found it (empty for us).
struct ErrClear {
  ~ErrClear() { ERR_clear_error(); }
};

ClientHelloInfo with_status(HelloStatus s) {
  ClientHelloInfo info;
  info.status = s;
  return info;
}

}  // namespace

std::string_view to_string(HelloStatus status) {
  switch (status) {
    case HelloStatus::kOk:
      return "ok";
    case HelloStatus::kNeedMore:
      return "need_more";
    case HelloStatus::kNotTls:
      return "not_tls";
    case HelloStatus::kMalformed:
      return "malformed";
    case HelloStatus::kTooLarge:
      return "too_large";
  }
  return "unknown";
}

ClientHelloInfo peek_client_hello(std::span<const std::uint8_t> bytes, std::size_t max_bytes) {
  if (bytes.empty()) return with_status(HelloStatus::kNeedMore);
  // First record: TLS handshake, major version 3. Anything else (HTTP,
  // SSLv2-compatible hello, SSH banner, ...) is not TLS for us.
  if (bytes[0] != kHandshake || (bytes.size() >= 2 && bytes[1] != 0x03))
    return with_status(HelloStatus::kNotTls);

  ErrClear clear_errors;
  Capture cap;
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(shared_ctx()));
  if (!ssl) throw std::runtime_error("client_hello: SSL_new failed");
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_null());
  if (rbio == nullptr || wbio == nullptr) {
    BIO_free(rbio);
    BIO_free(wbio);
    throw std::runtime_error("client_hello: BIO_new failed");
  }
  BIO_set_mem_eof_return(rbio, -1);    // empty buffer = "want read", not EOF
  SSL_set_bio(ssl.get(), rbio, wbio);  // ssl owns both
  SSL_set_accept_state(ssl.get());
  SSL_set_app_data(ssl.get(), &cap);

  // Feed one complete record at a time so that we know which records carry
  // the ClientHello and never look past it.
  std::size_t off = 0;
  for (;;) {
    if (off + kRecordHeader + 1 > max_bytes) return with_status(HelloStatus::kTooLarge);
    const std::size_t avail = bytes.size() - off;
    if (avail == 0) return with_status(HelloStatus::kNeedMore);
    const std::uint8_t* h = bytes.data() + off;
    if (h[0] != kHandshake) return with_status(HelloStatus::kMalformed);
    if (avail >= 2 && h[1] != 0x03) return with_status(HelloStatus::kMalformed);
    if (avail < kRecordHeader) return with_status(HelloStatus::kNeedMore);
    const std::size_t len = (std::size_t{h[3]} << 8) | h[4];
    if (len == 0 || len > kMaxRecordPayload) return with_status(HelloStatus::kMalformed);
    if (off + kRecordHeader + len > max_bytes) return with_status(HelloStatus::kTooLarge);
    if (avail < kRecordHeader + len) return with_status(HelloStatus::kNeedMore);

    const std::size_t rec = kRecordHeader + len;
    if (BIO_write(rbio, h, static_cast<int>(rec)) != static_cast<int>(rec))
      throw std::runtime_error("client_hello: BIO_write failed");
    off += rec;
    const int rc = SSL_accept(ssl.get());
    if (cap.error) std::rethrow_exception(cap.error);
    if (cap.fired) {
      if (!cap.valid) return with_status(HelloStatus::kMalformed);
      cap.info.status = HelloStatus::kOk;
      cap.info.record_bytes = off;
      return std::move(cap.info);
    }
    if (rc > 0 || SSL_get_error(ssl.get(), rc) != SSL_ERROR_WANT_READ)
      return with_status(HelloStatus::kMalformed);  // OpenSSL rejected it
  }
}

}  // namespace zn::proxy
