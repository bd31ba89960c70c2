#include "userspace/websocket/handshake.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <stdexcept>
#include <vector>

namespace zn::websocket {
namespace {

constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// The values of every field named `name`.
std::vector<const std::string*> fields(const std::vector<http::Header>& headers, std::string_view name) {
  std::vector<const std::string*> out;
  for (const http::Header& h : headers)
    if (http::iequals(h.name, name)) out.push_back(&h.value);
  return out;
}

// A comma-separated list (Connection) holds `token`, any case.
bool lists_token(const std::vector<http::Header>& headers, std::string_view name, std::string_view token) {
  for (const std::string* value : fields(headers, name)) {
    std::string_view rest = *value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
      while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
      if (http::iequals(item, token)) return true;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return false;
}

// 16 bytes in base64: 22 characters of the alphabet, then "==" (RFC 6455
// 4.1: a nonce "randomly selected 16-byte value that has been base64-encoded").
bool valid_key(std::string_view key) {
  if (key.size() != 24 || key.substr(22) != "==") return false;
  for (size_t i = 0; i < 22; ++i) {
    const char c = key[i];
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (!ok) return false;
  }
  // The last character before the padding carries 2 bits: the other 4 are zero.
  static constexpr std::string_view kLast = "AQgw";
  return kLast.find(key[21]) != std::string_view::npos;
}

}  // namespace

bool asks_for_websocket(const http::RequestHead& request) {
  return lists_token(request.headers, "upgrade", "websocket");
}

std::string request_error(const http::RequestHead& request) {
  if (request.method != "GET") return "a WebSocket handshake is a GET";
  if (request.version_minor != 1) return "a WebSocket handshake is HTTP/1.1";
  if (request.framing != http::BodyFraming::kNone) return "a WebSocket handshake has no body";
  const auto upgrade = fields(request.headers, "upgrade");
  if (upgrade.size() != 1 || !http::iequals(*upgrade[0], "websocket"))
    return "Upgrade must be exactly \"websocket\"";
  if (!lists_token(request.headers, "connection", "upgrade")) return "Connection lacks \"upgrade\"";
  const auto key = fields(request.headers, "sec-websocket-key");
  if (key.size() != 1 || !valid_key(*key[0])) return "Sec-WebSocket-Key must be one 16-byte base64 nonce";
  const auto version = fields(request.headers, "sec-websocket-version");
  if (version.size() != 1 || *version[0] != "13") return "Sec-WebSocket-Version must be 13";
  return "";
}

std::string make_key() {
  unsigned char nonce[16];
  if (RAND_bytes(nonce, sizeof(nonce)) != 1) throw std::runtime_error("no random bytes for a WebSocket key");
  unsigned char encoded[25];
  const int n = EVP_EncodeBlock(encoded, nonce, sizeof(nonce));
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(n));
}

std::string accept_for(std::string_view key) {
  std::string input(key);
  input.append(kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(input.data()), input.size(), digest);
  unsigned char encoded[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(encoded, digest, SHA_DIGEST_LENGTH);
  return std::string(reinterpret_cast<const char*>(encoded), static_cast<size_t>(n));
}

std::string response_error(const http::ResponseHead& response, std::string_view key) {
  if (response.status != 101) return "not 101";
  const auto upgrade = fields(response.headers, "upgrade");
  if (upgrade.size() != 1 || !http::iequals(*upgrade[0], "websocket")) return "Upgrade is not \"websocket\"";
  if (!lists_token(response.headers, "connection", "upgrade")) return "Connection lacks \"upgrade\"";
  const auto accept = fields(response.headers, "sec-websocket-accept");
  if (accept.size() != 1 || *accept[0] != accept_for(key))
    return "Sec-WebSocket-Accept does not match the key";
  if (!fields(response.headers, "sec-websocket-extensions").empty()) return "an extension nobody offered";
  return "";
}

bool dropped_request_field(std::string_view name) { return http::iequals(name, "sec-websocket-extensions"); }

std::string upgrade_request_head(const http::ForwardedRequest& forwarded, std::string_view host) {
  std::string out;
  out.reserve(256 + forwarded.target.size() + forwarded.headers.size() * 48);
  out.append("GET ").append(forwarded.target).append(" HTTP/1.1\r\nHost: ").append(host).append("\r\n");
  for (const http::Header& h : forwarded.headers) {
    if (dropped_request_field(h.name)) continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  out.append("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  return out;
}

std::string switching_head(const std::vector<http::Header>& fields) {
  std::string out = "HTTP/1.1 101 Switching Protocols\r\n";
  for (const http::Header& h : fields) {
    // A 101 has no body: a length it names means nothing, and is not passed on.
    if (http::iequals(h.name, "content-length")) continue;
    out.append(h.name).append(": ").append(h.value).append("\r\n");
  }
  out.append("Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  return out;
}

}  // namespace zn::websocket
