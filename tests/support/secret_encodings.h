// The forms a leaked secret could take in a file or a stream: the value raw,
// base64 in both alphabets with and without padding, and hex. Tests search
// for each (issue 12: "search for the raw value, base64 and hex").
#pragma once

#include <sodium.h>

#include <string>
#include <vector>

namespace zn::test {

inline std::vector<std::string> encodings_of(const std::string& v) {
  std::vector<std::string> out{v};
  for (int variant : {sodium_base64_VARIANT_ORIGINAL, sodium_base64_VARIANT_ORIGINAL_NO_PADDING,
                      sodium_base64_VARIANT_URLSAFE, sodium_base64_VARIANT_URLSAFE_NO_PADDING}) {
    std::string b(sodium_base64_encoded_len(v.size(), variant), '\0');
    sodium_bin2base64(b.data(), b.size(), reinterpret_cast<const unsigned char*>(v.data()), v.size(),
                      variant);
    b.resize(b.size() - 1);  // the encoder's NUL
    out.push_back(b);
  }
  std::string hex(v.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(v.data()), v.size());
  hex.resize(hex.size() - 1);
  out.push_back(hex);
  return out;
}

}  // namespace zn::test
