#include "broker/identity/base64url.h"

#include <sodium.h>

namespace zn::broker {
namespace {

constexpr int kVariant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;

}  // namespace

std::string base64url_encode(std::span<const unsigned char> bytes) {
  std::string text(sodium_base64_encoded_len(bytes.size(), kVariant), '\0');
  sodium_bin2base64(text.data(), text.size(), bytes.data(), bytes.size(), kVariant);
  text.pop_back();  // the encoder's terminating NUL
  return text;
}

std::string base64url_encode(std::string_view bytes) {
  return base64url_encode(
      std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

std::optional<std::string> base64url_decode(std::string_view text) {
  std::string bytes(text.size() / 4 * 3 + 3, '\0');
  std::size_t length = 0;
  const char* end = nullptr;
  // ignore = nullptr: no character is skipped; end must reach the last one,
  // or the decoder stopped at something outside the alphabet.
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                        text.size(), nullptr, &length, &end, kVariant) != 0 ||
      end != text.data() + text.size())
    return std::nullopt;
  bytes.resize(length);
  return bytes;
}

}  // namespace zn::broker
