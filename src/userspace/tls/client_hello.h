// Peek at the first bytes a guest sent on a TLS connection and extract what
// the proxy decides on (SNI, ALPN), without answering anything. OpenSSL parses
// the ClientHello (its ClientHello callback over a memory BIO); the only
// hand-read framing is the 5-byte TLS record header, used to bound the input
// and to tell "incomplete" from "not TLS" from "too large".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zn::proxy {

enum class HelloStatus {
  kOk,         // a complete ClientHello was parsed; fields below are valid
  kNeedMore,   // not yet a complete ClientHello: read more (within the bound)
  kNotTls,     // first bytes are not a TLS handshake record (e.g. plain HTTP)
  kMalformed,  // TLS framing, but the ClientHello (or its SNI/ALPN) is invalid
  kTooLarge,   // the ClientHello's records would exceed max_bytes
};

std::string_view to_string(HelloStatus status);

// Default bound on the bytes (record headers included) a ClientHello may take.
inline constexpr std::size_t kMaxClientHelloBytes = 16 * 1024;

struct ClientHelloInfo {
  HelloStatus status = HelloStatus::kNeedMore;
  // server_name host_name, lowercased; absent when no server_name extension.
  std::optional<std::string> sni;
  // The SNI is an IPv4/IPv6 literal, or something getaddrinfo would take for
  // one (inet_aton forms such as "127.1" or "0x7f000001", numeric last label).
  bool sni_is_ip_literal = false;
  // ALPN protocol names in the client's order (empty: no ALPN extension).
  std::vector<std::string> alpn;
  // ClientHello.legacy_version (e.g. 0x0303) and supported_versions (ext 43)
  // in the client's order (empty when the extension is absent).
  std::uint16_t legacy_version = 0;
  std::vector<std::uint16_t> supported_versions;
  // Bytes of the input consumed by the records carrying the ClientHello
  // (valid with kOk); anything after them (e.g. 0-RTT data) is not examined.
  std::size_t record_bytes = 0;
};

// Pure function of its input; thread-safe (one shared SSL_CTX, an SSL per
// call). Never writes anything anywhere: the handshake is aborted from the
// ClientHello callback, and any alert goes to a null BIO.
ClientHelloInfo peek_client_hello(std::span<const std::uint8_t> bytes,
                                  std::size_t max_bytes = kMaxClientHelloBytes);

}  // namespace zn::proxy
