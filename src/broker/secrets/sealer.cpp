#include "broker/secrets/sealer.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

namespace zn::broker {
namespace {

constexpr std::string_view kMagic = "znsealed:";
constexpr std::string_view kVersion = "v1";
constexpr std::size_t kNonceBytes = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES;  // 24
constexpr std::size_t kTagBytes = crypto_aead_xchacha20poly1305_ietf_ABYTES;       // 16
constexpr int kBase64 = sodium_base64_VARIANT_URLSAFE_NO_PADDING;

std::string header_for(std::string_view key_id) {
  return std::string(kMagic) + std::string(kVersion) + ":" + std::string(key_id) + ":";
}

std::string associated_data(std::string_view header, std::string_view context) {
  return std::string(header) + std::string(context);
}

Unsealed failure(UnsealError error, std::string message) {
  return Unsealed{std::nullopt, error, std::move(message)};
}

// A field from a damaged or future file, fit to quote in a message: cut
// to max characters, anything unprintable as '?'.
std::string quotable(std::string_view s, std::size_t max) {
  std::string out(s.substr(0, max));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c < 0x20 || c > 0x7e; }, '?');
  return s.size() > max ? out + "..." : out;
}

bool is_key_id(std::string_view s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string_view to_string(UnsealError e) {
  switch (e) {
    case UnsealError::kNone:
      return "none";
    case UnsealError::kNotAnEnvelope:
      return "not_an_envelope";
    case UnsealError::kUnknownVersion:
      return "unknown_version";
    case UnsealError::kWrongKey:
      return "wrong_key";
    case UnsealError::kAuthenticationFailed:
      return "authentication_failed";
  }
  return "unknown";
}

std::string seal(const HostKey& key, std::string_view plaintext, std::string_view context) {
  const std::string header = header_for(key.id());
  const std::string ad = associated_data(header, context);
  std::vector<unsigned char> box(kNonceBytes + plaintext.size() + kTagBytes);
  randombytes_buf(box.data(), kNonceBytes);
  unsigned long long sealed_len = 0;
  key.with_key([&](std::span<const unsigned char> k) {
    crypto_aead_xchacha20poly1305_ietf_encrypt(
        box.data() + kNonceBytes, &sealed_len, reinterpret_cast<const unsigned char*>(plaintext.data()),
        plaintext.size(), reinterpret_cast<const unsigned char*>(ad.data()), ad.size(), nullptr, box.data(),
        k.data());
  });
  std::string text(sodium_base64_encoded_len(box.size(), kBase64), '\0');
  sodium_bin2base64(text.data(), text.size(), box.data(), box.size(), kBase64);
  text.resize(text.size() - 1);  // the encoder's terminating NUL
  return header + text;
}

std::string seal(const HostKey& key, const Secret& value, std::string_view context) {
  return value.reveal([&](std::string_view plaintext) { return seal(key, plaintext, context); });
}

Unsealed unseal(const HostKey& key, std::string_view envelope, std::string_view context) {
  if (!envelope.starts_with(kMagic)) return failure(UnsealError::kNotAnEnvelope, "not a sealed value");
  std::string_view rest = envelope.substr(kMagic.size());
  const std::size_t version_end = rest.find(':');
  if (version_end == std::string_view::npos)
    return failure(UnsealError::kNotAnEnvelope, "sealed value cut short (no key id)");
  const std::string_view version = rest.substr(0, version_end);
  if (version != kVersion)
    return failure(UnsealError::kUnknownVersion, "sealed value of format '" + quotable(version, 16) +
                                                     "'; this build reads " + std::string(kVersion));
  rest.remove_prefix(version_end + 1);
  const std::size_t id_end = rest.find(':');
  if (id_end == std::string_view::npos)
    return failure(UnsealError::kNotAnEnvelope, "sealed value cut short (no payload)");
  const std::string_view key_id = rest.substr(0, id_end);
  if (!is_key_id(key_id)) return failure(UnsealError::kNotAnEnvelope, "sealed value with a malformed key id");
  if (key_id != key.id())
    return failure(UnsealError::kWrongKey,
                   "sealed under key " + std::string(key_id) + ", this host's key is " + key.id());
  const std::string_view payload = rest.substr(id_end + 1);

  std::vector<unsigned char> box(payload.size() / 4 * 3 + 3);
  std::size_t box_len = 0;
  if (sodium_base642bin(box.data(), box.size(), payload.data(), payload.size(), nullptr, &box_len, nullptr,
                        kBase64) != 0)
    return failure(UnsealError::kNotAnEnvelope, "sealed value's payload is not base64url");
  if (box_len < kNonceBytes + kTagBytes)
    return failure(UnsealError::kNotAnEnvelope, "sealed value too short to hold a nonce and a tag");

  const std::string ad = associated_data(envelope.substr(0, envelope.size() - payload.size()), context);
  const unsigned char* sealed = box.data() + kNonceBytes;
  const std::size_t sealed_len = box_len - kNonceBytes;
  bool opened = false;
  // Decrypted straight into guarded pages; on failure libsodium writes
  // nothing usable and the pages are wiped as they are freed.
  auto bytes = std::make_shared<const GuardedBytes>(
      sealed_len - kTagBytes, GuardedBytes::Fill{}, [&](std::span<unsigned char> out) {
        key.with_key([&](std::span<const unsigned char> k) {
          unsigned long long out_len = 0;
          opened =
              crypto_aead_xchacha20poly1305_ietf_decrypt(out.data(), &out_len, nullptr, sealed, sealed_len,
                                                         reinterpret_cast<const unsigned char*>(ad.data()),
                                                         ad.size(), box.data(), k.data()) == 0 &&
              out_len == out.size();
        });
      });
  if (!opened)
    return failure(UnsealError::kAuthenticationFailed, "sealed value does not open for '" +
                                                           quotable(context, 200) +
                                                           "': sealed for another place, or altered");
  return Unsealed{Secret(std::move(bytes)), UnsealError::kNone, {}};
}

Resealed reseal(const HostKey& from, const HostKey& to, std::string_view envelope, std::string_view context) {
  const bool already = envelope.starts_with(header_for(to.id()));
  Unsealed opened = unseal(already ? to : from, envelope, context);
  if (!opened.ok()) return Resealed{{}, opened.error, std::move(opened.message)};
  if (already) return Resealed{std::string(envelope), UnsealError::kNone, {}};
  return Resealed{seal(to, *opened.value, context), UnsealError::kNone, {}};
}

}  // namespace zn::broker
