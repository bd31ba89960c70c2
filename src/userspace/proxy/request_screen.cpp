#include "userspace/proxy/request_screen.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <tuple>

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

// A guest chooses its encoding byte by byte ("AKIA%5A..." or "\\u0041KIA"),
// where an echoing server encodes whole values the usual way: what it
// sends is also screened decoded, percent-escapes and '+' (how a server
// reads a target or a form: http::form_decode), and JSON escapes (how it
// reads a JSON body).
std::string json_unescaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char e = s[i + 1];
    if (e == 'u' && i + 5 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 2; k < 6; ++k) {
        const int digit = http::hex_value(s[i + k]);
        ok = ok && digit >= 0;
        v = v * 16 + std::max(0, digit);
      }
      if (ok && v < 0x80) {
        out.push_back(static_cast<char>(v));
        i += 5;
        continue;
      }
    }
    if (e == '/' || e == '\\' || e == '"') {
      out.push_back(e);
      ++i;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

void merge(std::vector<std::string>& into, std::vector<std::string> more) {
  for (std::string& l : more)
    if (std::find(into.begin(), into.end(), l) == into.end()) into.push_back(std::move(l));
}

}  // namespace

bool RequestScreen::arm(const std::vector<Tripwire>& tripwires) {
  bool ok = true;
  for (const Tripwire& t : tripwires) ok = scrubber_.add_secret(t.pattern, t.label) && ok;
  return ok;
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

std::vector<std::string> RequestScreen::check_as_is(std::string_view bytes,
                                                    const std::vector<Substitution>& exempt) const {
  SecretScrubber::Stream stream(scrubber_);
  std::string sink;
  sink.reserve(bytes.size());
  stream.feed(bytes, sink);
  stream.finish(sink);
  OPENSSL_cleanse(sink.data(), sink.size());
  return hits(stream.report(), exempt);
}

std::vector<std::string> RequestScreen::check(std::string_view bytes,
                                              const std::vector<Substitution>& exempt) const {
  if (!armed() || bytes.empty()) return {};
  std::vector<std::string> out = check_as_is(bytes, exempt);
  if (bytes.find_first_of("%+") != std::string_view::npos)
    merge(out, check_as_is(http::form_decode(bytes), exempt));
  if (bytes.find('\\') != std::string_view::npos) merge(out, check_as_is(json_unescaped(bytes), exempt));
  return out;
}

namespace {

// Where a trailing escape that the next piece may complete starts ('%' and
// up to two more bytes; '\\' and up to five), or npos.
size_t cut_escape(std::string_view s, char lead, size_t span) {
  const size_t from = s.size() > span ? s.size() - span : 0;
  const size_t at = s.find(lead, from);
  return at;
}

// What exempts a tripwire is its label; the caller's list may not outlive
// the screen, and its credentials are not the screen's to keep.
std::vector<Substitution> labels_of(const std::vector<Substitution>& subs) {
  std::vector<Substitution> out;
  for (const Substitution& s : subs) out.push_back({"", "", s.label});
  return out;
}

void sink(SecretScrubber::Stream& stream, std::string_view bytes) {
  std::string discard;
  stream.feed(bytes, discard);
  OPENSSL_cleanse(discard.data(), discard.size());
}

}  // namespace

StreamScreen::StreamScreen(const RequestScreen& screen, const std::vector<Substitution>& exempt)
    : screen_(screen),
      exempt_(labels_of(exempt)),
      raw_(screen.scrubber()),
      percent_(screen.scrubber()),
      json_(screen.scrubber()),
      // "\\u00XX" is six bytes for one: the longest way to spell a pattern.
      window_(6 * screen.scrubber().longest() + 16) {}

StreamScreen::~StreamScreen() {
  OPENSSL_cleanse(held_.data(), held_.size());
  OPENSSL_cleanse(pending_percent_.data(), pending_percent_.size());
  OPENSSL_cleanse(pending_json_.data(), pending_json_.size());
}

std::vector<std::string> StreamScreen::found() const {
  std::vector<std::string> out = screen_.hits(raw_.report(), exempt_);
  merge(out, screen_.hits(percent_.report(), exempt_));
  merge(out, screen_.hits(json_.report(), exempt_));
  return out;
}

std::vector<std::string> StreamScreen::feed(std::string_view in, std::string& out) {
  sink(raw_, in);
  for (auto [pending, lead, span, decode] :
       {std::tuple{&pending_percent_, '%', size_t{2}, &http::form_decode},
        std::tuple{&pending_json_, '\\', size_t{5}, &json_unescaped}}) {
    pending->append(in);
    const size_t cut = cut_escape(*pending, lead, span);
    const std::string_view ready =
        std::string_view(*pending).substr(0, cut == std::string::npos ? pending->size() : cut);
    std::string decoded = decode(ready);
    sink(lead == '%' ? percent_ : json_, decoded);
    OPENSSL_cleanse(decoded.data(), decoded.size());
    pending->erase(0, ready.size());
  }
  held_.append(in);
  std::vector<std::string> hits = found();
  if (!hits.empty()) return hits;
  if (held_.size() > window_) {
    out.append(held_, 0, held_.size() - window_);
    held_.erase(0, held_.size() - window_);
  }
  return {};
}

std::vector<std::string> StreamScreen::finish(std::string& out) {
  std::string decoded = http::form_decode(pending_percent_);
  sink(percent_, decoded);
  decoded = json_unescaped(pending_json_);
  sink(json_, decoded);
  std::string discard;
  for (SecretScrubber::Stream* s : {&raw_, &percent_, &json_}) s->finish(discard);
  OPENSSL_cleanse(discard.data(), discard.size());
  std::vector<std::string> hits = found();
  if (!hits.empty()) return hits;
  out.append(held_);
  held_.clear();
  return {};
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
