#include "userspace/proxy/request_screen.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "userspace/http/rewrite.h"

namespace zn::proxy {
namespace {

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && http::iequals(s.substr(0, prefix.size()), prefix);
}

std::string json_escaped(std::string_view v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      out.append("\\u00").push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string encoded(std::string_view credential, BodyKind as) {
  switch (as) {
    case BodyKind::kJson:
      return json_escaped(credential);
    case BodyKind::kForm:
      return http::percent_encode(credential);
    case BodyKind::kOther:
      break;
  }
  return std::string(credential);
}

}  // namespace

bool RequestScreen::arm(const std::vector<Tripwire>& tripwires) {
  std::vector<std::pair<std::string_view, std::string_view>> list;
  list.reserve(tripwires.size());
  for (const Tripwire& t : tripwires) list.emplace_back(t.pattern, t.label);
  return scrubber_.add_secrets(list);
}

std::vector<std::string> RequestScreen::hits(const ScrubReport& report,
                                             const std::vector<Substitution>& exempt) const {
  std::vector<std::string> out;
  if (report.matches == 0) return out;
  for (size_t i = 0; i < scrubber_.secret_count(); ++i) {
    if (!(report.secrets >> i & 1)) continue;
    const std::string& label = scrubber_.label(i);
    const bool own =
        std::any_of(exempt.begin(), exempt.end(), [&](const Substitution& s) { return s.label == label; });
    if (!own && std::find(out.begin(), out.end(), label) == out.end()) out.push_back(label);
  }
  return out;
}

std::vector<std::string> RequestScreen::check(std::string_view bytes,
                                              const std::vector<Substitution>& exempt) const {
  if (!armed() || bytes.empty()) return {};
  return hits(scrubber_.detect(bytes), exempt);
}

namespace {

// What exempts a tripwire is its label; the caller's list may not outlive
// the screen, and its credentials are not the screen's to keep.
std::vector<Substitution> labels_of(const std::vector<Substitution>& subs) {
  std::vector<Substitution> out;
  for (const Substitution& s : subs) out.push_back({"", "", s.label});
  return out;
}

}  // namespace

StreamScreen::StreamScreen(const RequestScreen& screen, const std::vector<Substitution>& exempt)
    : screen_(screen),
      exempt_(labels_of(exempt)),
      stream_(screen.scrubber(), SecretScrubber::Stream::Mode::kDetect) {}

StreamScreen::~StreamScreen() { OPENSSL_cleanse(ready_.data(), ready_.size()); }

std::vector<std::string> StreamScreen::release(std::vector<std::string> hits, std::string& out) {
  if (hits.empty()) out.append(ready_);
  OPENSSL_cleanse(ready_.data(), ready_.size());
  ready_.clear();
  return hits;
}

std::vector<std::string> StreamScreen::feed(std::string_view in, std::string& out) {
  stream_.feed(in, ready_);
  return release(screen_.hits(stream_.report(), exempt_), out);
}

std::vector<std::string> StreamScreen::end_message(std::string& out) {
  stream_.end_message(ready_);
  return release(screen_.hits(stream_.report(), exempt_), out);
}

std::vector<std::string> StreamScreen::finish(std::string& out) {
  stream_.finish(ready_);
  return release(screen_.hits(stream_.report(), exempt_), out);
}

BodyKind body_kind(const http::RequestHead& head) {
  const std::string* type = head.find("content-type");
  if (!type) return BodyKind::kOther;
  std::string_view t = *type;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  const std::string_view media = t.substr(0, t.find(';'));
  if (starts_with_ci(media, "application/x-www-form-urlencoded")) return BodyKind::kForm;
  if (starts_with_ci(media, "application/json")) return BodyKind::kJson;
  // application/<vendor>+json
  const size_t plus = media.rfind('+');
  if (plus != std::string_view::npos && http::iequals(media.substr(plus), "+json")) return BodyKind::kJson;
  return BodyKind::kOther;
}

size_t swap_placeholders(std::string& text, const std::vector<Substitution>& subs, BodyKind encoding) {
  size_t swapped = 0;
  for (const Substitution& s : subs) {
    if (s.placeholder.empty() || text.find(s.placeholder) == std::string::npos) continue;
    std::string value = encoded(s.credential, encoding);
    std::string out;
    out.reserve(text.size() + value.size());
    size_t pos = 0;
    for (size_t at; (at = text.find(s.placeholder, pos)) != std::string::npos;
         pos = at + s.placeholder.size()) {
      out.append(text, pos, at - pos).append(value);
      ++swapped;
    }
    out.append(text, pos, std::string::npos);
    OPENSSL_cleanse(value.data(), value.size());
    OPENSSL_cleanse(text.data(), text.size());
    text = std::move(out);
  }
  return swapped;
}

size_t swap_placeholders_in_query(std::string& query, const std::vector<Substitution>& subs) {
  return swap_placeholders(query, subs, BodyKind::kForm);
}

}  // namespace zn::proxy
