#include "broker/session/body_preview.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "userspace/proxy/secret_scrubber.h"

namespace zn::broker {
namespace {

void hide(std::vector<char>& hidden, size_t from, size_t to) {
  std::fill(hidden.begin() + static_cast<std::ptrdiff_t>(from),
            hidden.begin() + static_cast<std::ptrdiff_t>(to), 1);
}

void escape_into(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  if (c == '\\') {
    out += "\\\\";
  } else if (c >= 0x20 && c < 0x7f) {
    out += static_cast<char>(c);
  } else {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
}

}  // namespace

std::string redact_body_preview(std::string_view raw, const std::vector<std::string_view>& secrets) {
  raw = raw.substr(0, std::min(raw.size(), BodyPreview::kMax));
  std::vector<char> hidden(raw.size(), 0);
  // By rule, as the proxy's scrubber finds them: any subset of the bytes
  // percent-, backslash- or entity-escaped in either case, line-wrapped
  // base64, UTF-16, quoted-printable (secret_scrubber.h). A secret the
  // scrubber cannot hold hides the whole preview.
  if (!secrets.empty()) {
    proxy::SecretScrubber scrubber;
    bool held = true;
    for (std::string_view secret : secrets)
      if (!secret.empty()) held = scrubber.add_secret(secret, "resource") && held;
    if (!held) return std::string(BodyPreview::kRedacted);
    proxy::SecretScrubber::Stream stream(scrubber, proxy::SecretScrubber::Stream::Mode::kDetect);
    std::vector<std::pair<uint64_t, uint64_t>> found;
    stream.record_matches(&found);
    std::string passed;
    passed.reserve(raw.size());  // no reallocation leaves a copy unwiped
    stream.feed(raw, passed);
    stream.finish(passed);
    OPENSSL_cleanse(passed.data(), passed.size());
    for (const auto& [from, to] : found)
      if (from < raw.size()) hide(hidden, static_cast<size_t>(from), std::min<size_t>(to, raw.size()));
  }
  for (std::string_view secret : secrets) {
    std::vector<proxy::SecretPattern> patterns = proxy::secret_patterns(secret);
    for (proxy::SecretPattern& p : patterns) {
      const std::string_view b = p.bytes;
      if (b.empty()) continue;
      for (size_t at = raw.find(b); at != std::string_view::npos; at = raw.find(b, at + 1))
        hide(hidden, at, at + b.size());
      // Cut off by the preview's end: the longest trailing run that begins
      // the pattern.
      for (size_t k = std::min(b.size() - 1, raw.size()); k >= BodyPreview::kMinPartial; --k)
        if (raw.substr(raw.size() - k) == b.substr(0, k)) {
          hide(hidden, raw.size() - k, raw.size());
          break;
        }
      OPENSSL_cleanse(p.bytes.data(), p.bytes.size());
    }
  }
  std::string out;
  out.reserve(raw.size() + 16);
  for (size_t i = 0; i < raw.size();) {
    if (hidden[i]) {
      out += BodyPreview::kRedacted;  // one marker per run: no fragment survives
      while (i < raw.size() && hidden[i]) ++i;
      continue;
    }
    escape_into(out, static_cast<unsigned char>(raw[i++]));
  }
  return out;
}

std::string redact_body_preview(std::string_view raw, const Policy& policy) {
  // Reserved up front: a reallocation would leave copies behind unwiped.
  size_t fields = 0;
  for (const auto& [name, resource] : policy.resources) fields += resource.fields.size();
  std::vector<std::string> copies;
  copies.reserve(fields);
  for (const auto& [name, resource] : policy.resources)
    for (const auto& [field, value] : resource.fields)
      if (!value.empty()) value.reveal([&](std::string_view v) { copies.emplace_back(v); });
  std::vector<std::string_view> views(copies.begin(), copies.end());
  std::string out = redact_body_preview(raw, views);
  for (std::string& c : copies) OPENSSL_cleanse(c.data(), c.size());
  return out;
}

std::vector<std::string> shown_header_names(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (size_t i = 0; i < names.size() && i < BodyPreview::kMaxHeaderNames; ++i) {
    const std::string_view name = std::string_view(names[i]).substr(0, BodyPreview::kMaxHeaderName);
    std::string shown;
    for (char c : name) escape_into(shown, static_cast<unsigned char>(c));
    out.push_back(std::move(shown));
  }
  return out;
}

}  // namespace zn::broker
