#include "userspace/proxy/secret_scrubber.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <optional>

namespace zn::proxy {
namespace {

constexpr char kB64Std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr char kB64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void cleanse(std::string& s) {
  if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
  s.clear();
}
template <typename T>
void cleanse(std::vector<T>& v) {
  if (!v.empty()) OPENSSL_cleanse(v.data(), v.size() * sizeof(T));
  v.clear();
  v.shrink_to_fit();
}

std::string base64_unpadded(std::string_view in, const char* alphabet) {
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 0x3f]);
  return out;
}

// The base64 characters that depend on the secret alone when it starts
// `align` bytes into a 3-byte group: whatever surrounds it in a longer blob,
// these come out the same. Character j covers bits [6j, 6j+6).
std::string base64_core(std::string_view secret, size_t align, const char* alphabet) {
  std::string shifted(align, '\0');
  shifted.append(secret);
  std::string enc = base64_unpadded(shifted, alphabet);
  cleanse(shifted);
  const size_t first = (8 * align + 5) / 6, end = (8 * (align + secret.size())) / 6;
  std::string core = end > first ? enc.substr(first, end - first) : std::string();
  cleanse(enc);
  return core;
}

bool is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string url_encoded(std::string_view secret, std::string_view keep, bool upper, bool plus_for_space) {
  const char* hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  for (unsigned char c : secret) {
    if (is_alnum(c) || (c != 0 && keep.find(static_cast<char>(c)) != std::string_view::npos)) {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ' && plus_for_space) {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

// Code points of valid UTF-8, nullopt otherwise.
std::optional<std::vector<uint32_t>> utf8_code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      n = 1, cp = c;
    } else if ((c & 0xe0) == 0xc0) {
      n = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 4, cp = c & 0x07;
    } else {
      return std::nullopt;
    }
    if (i + n > s.size()) return std::nullopt;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xc0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (cc & 0x3f);
    }
    out.push_back(cp);
    i += n;
  }
  return out;
}

struct JsonStyle {
  bool escape_slash, ascii_only, upper_hex, html_safe;
};

void json_u(std::string& out, uint32_t unit, bool upper) {
  const char* hex = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(hex[(unit >> shift) & 15]);
}

// As common encoders emit a string's contents (Python json.dumps, JS
// JSON.stringify, Go encoding/json, PHP json_encode, Jackson).
std::optional<std::string> json_escaped(std::string_view secret, const JsonStyle& st) {
  auto cps = utf8_code_points(secret);
  if (!cps) return std::nullopt;  // no JSON encoder emits invalid UTF-8 as is
  std::string out;
  for (uint32_t cp : *cps) {
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '/':
        out += st.escape_slash ? "\\/" : "/";
        continue;
      default:
        break;
    }
    const bool html = st.html_safe && (cp == '<' || cp == '>' || cp == '&' || cp == 0x2028 || cp == 0x2029);
    if (cp < 0x20 || html || (st.ascii_only && cp >= 0x80)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        json_u(out, 0xd800 + (v >> 10), st.upper_hex);
        json_u(out, 0xdc00 + (v & 0x3ff), st.upper_hex);
      } else {
        json_u(out, cp, st.upper_hex);
      }
      continue;
    }
    // Unescaped: the code point's own UTF-8 bytes.
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }
  cleanse(*cps);
  return out;
}

// (double quote, single quote) as HTML escapers write them; nullptr: left as is.
constexpr std::array<std::pair<const char*, const char*>, 6> kHtmlQuotes = {{
    {"&quot;", "&#x27;"},  // Python html.escape
    {"&quot;", "&#039;"},  // PHP htmlspecialchars (ENT_QUOTES)
    {"&#34;", "&#39;"},    // Go html.EscapeString, html/template
    {"&quot;", "&#39;"},   // Ruby CGI.escapeHTML, ERB
    {"&quot;", "&apos;"},  // XML / ENT_HTML5
    {nullptr, nullptr},    // only & < > (quote=False)
}};

std::string html_escaped(std::string_view secret, const char* dq, const char* sq) {
  std::string out;
  for (char c : secret) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        if (dq)
          out += dq;
        else
          out.push_back(c);
        break;
      case '\'':
        if (sq)
          out += sq;
        else
          out.push_back(c);
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::string_view encoding_name(SecretEncoding e) {
  switch (e) {
    case SecretEncoding::kRaw:
      return "raw";
    case SecretEncoding::kBase64:
      return "base64";
    case SecretEncoding::kBase64Url:
      return "base64url";
    case SecretEncoding::kUrl:
      return "url";
    case SecretEncoding::kJson:
      return "json";
    case SecretEncoding::kHtml:
      return "html";
    case SecretEncoding::kHex:
      return "hex";
  }
  return "?";
}

std::vector<std::string> ScrubReport::encoding_names() const {
  std::vector<std::string> out;
  for (size_t e = 0; e < kSecretEncodings; ++e)
    if (encodings & (1u << e)) out.emplace_back(encoding_name(static_cast<SecretEncoding>(e)));
  return out;
}

std::vector<SecretPattern> secret_patterns(std::string_view secret) {
  std::vector<SecretPattern> out;
  if (secret.empty()) return out;
  auto add = [&](std::string bytes, SecretEncoding e) {
    // Encoded forms shorter than the minimum would match ordinary text.
    const bool ok =
        !bytes.empty() && (e == SecretEncoding::kRaw || bytes.size() >= SecretScrubber::kMinEncodedSecret) &&
        std::none_of(out.begin(), out.end(), [&](const SecretPattern& p) { return p.bytes == bytes; });
    if (ok) {
      out.push_back({std::move(bytes), e});
    } else {
      cleanse(bytes);
    }
  };
  add(std::string(secret), SecretEncoding::kRaw);
  if (secret.size() < SecretScrubber::kMinEncodedSecret) return out;
  for (size_t align = 0; align < 3; ++align) {
    add(base64_core(secret, align, kB64Std), SecretEncoding::kBase64);
    add(base64_core(secret, align, kB64Url), SecretEncoding::kBase64Url);
  }
  // RFC 3986 unreserved (Python quote, curl), JS encodeURIComponent, WHATWG
  // form / Java URLEncoder, PHP urlencode, and everything but alphanumerics.
  for (std::string_view keep : {"-._~", "-_.!~*'()", "-._*", "-._", ""})
    for (bool upper : {true, false})
      for (bool plus : {false, true}) add(url_encoded(secret, keep, upper, plus), SecretEncoding::kUrl);
  for (int bits = 0; bits < 16; ++bits) {
    const JsonStyle st{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0};
    if (auto j = json_escaped(secret, st)) add(std::move(*j), SecretEncoding::kJson);
  }
  for (const auto& [dq, sq] : kHtmlQuotes) add(html_escaped(secret, dq, sq), SecretEncoding::kHtml);
  for (const char* digits : {"0123456789abcdef", "0123456789ABCDEF"}) {
    std::string hex;
    for (unsigned char c : secret) hex.append({digits[c >> 4], digits[c & 15]});
    add(std::move(hex), SecretEncoding::kHex);
  }
  return out;
}

SecretScrubber::~SecretScrubber() { clear(); }

void SecretScrubber::clear() {
  for (std::string& s : secrets_) cleanse(s);
  secrets_.clear();
  labels_.clear();
  wipe_automaton();
}

void SecretScrubber::wipe_automaton() {
  cleanse(next_);
  cleanse(depth_);
  cleanse(match_len_);
  cleanse(match_enc_);
  cleanse(match_sec_);
  OPENSSL_cleanse(class_of_, sizeof class_of_);
  classes_ = 1;
  longest_ = 0;
  pattern_count_ = 0;
}

bool SecretScrubber::add_secret(std::string_view secret, std::string_view label) {
  if (secret.empty() || secret.size() > kMaxSecretBytes) return false;
  if (std::find(secrets_.begin(), secrets_.end(), secret) != secrets_.end()) return true;
  if (secrets_.size() >= kMaxSecrets) return false;
  secrets_.emplace_back(secret);
  labels_.emplace_back(label);
  build();
  if (next_.size() > kMaxTableEntries) {
    // Too big to hold per connection: the caller refuses to inject it.
    cleanse(secrets_.back());
    secrets_.pop_back();
    labels_.pop_back();
    build();
    return false;
  }
  return true;
}

void SecretScrubber::build() {
  wipe_automaton();
  struct Owned {
    SecretPattern p;
    size_t secret;
  };
  std::vector<Owned> all;
  for (size_t i = 0; i < secrets_.size(); ++i)
    for (SecretPattern& p : secret_patterns(secrets_[i])) all.push_back({std::move(p), i});
  // Byte classes: each byte that occurs in a pattern gets its own column,
  // every other byte shares column 0, which always leads back to the root.
  for (const Owned& o : all)
    for (unsigned char c : o.p.bytes)
      if (class_of_[c] == 0) class_of_[c] = static_cast<uint8_t>(classes_++);
  const size_t k = classes_;
  constexpr uint32_t kNone = UINT32_MAX;
  auto new_state = [&](uint16_t depth) {
    next_.resize(next_.size() + k, kNone);
    depth_.push_back(depth);
    match_len_.push_back(0);
    match_enc_.push_back(0);
    match_sec_.push_back(0);
    return static_cast<uint32_t>(depth_.size() - 1);
  };
  new_state(0);
  for (const Owned& o : all) {
    uint32_t s = 0;
    for (size_t i = 0; i < o.p.bytes.size(); ++i) {
      const size_t c = class_of_[static_cast<unsigned char>(o.p.bytes[i])];
      if (next_[s * k + c] == kNone) {
        const uint32_t t = new_state(static_cast<uint16_t>(i + 1));
        next_[s * k + c] = t;
      }
      s = next_[s * k + c];
    }
    match_len_[s] = static_cast<uint16_t>(std::max<size_t>(match_len_[s], o.p.bytes.size()));
    match_enc_[s] |= 1u << static_cast<unsigned>(o.p.encoding);
    match_sec_[s] |= uint64_t{1} << o.secret;
    longest_ = std::max(longest_, o.p.bytes.size());
  }
  pattern_count_ = all.size();
  for (Owned& o : all) cleanse(o.p.bytes);
  // Breadth first: failure links, then every missing transition filled from
  // the failure state's, making a DFA. A state's matches include those of
  // its failure state (the patterns that are its suffixes).
  std::vector<uint32_t> fail(depth_.size(), 0);
  std::deque<uint32_t> queue;
  for (size_t c = 0; c < k; ++c) {
    uint32_t& t = next_[c];
    if (t == kNone) {
      t = 0;
    } else {
      fail[t] = 0;
      queue.push_back(t);
    }
  }
  while (!queue.empty()) {
    const uint32_t s = queue.front();
    queue.pop_front();
    const uint32_t f = fail[s];
    match_len_[s] = std::max(match_len_[s], match_len_[f]);
    match_enc_[s] |= match_enc_[f];
    match_sec_[s] |= match_sec_[f];
    for (size_t c = 0; c < k; ++c) {
      uint32_t& t = next_[s * k + c];
      if (t == kNone) {
        t = next_[f * k + c];
      } else {
        fail[t] = next_[f * k + c];
        queue.push_back(t);
      }
    }
  }
  cleanse(fail);
  // The hot loop's form: each entry is the target's row offset (state * k),
  // flagged when a pattern ends there, so one load per byte and no multiply
  // on the dependency chain.
  for (uint32_t& t : next_) t = static_cast<uint32_t>(t * k) | (match_len_[t] != 0 ? kMatchFlag : 0);
}

SecretScrubber::Stream::~Stream() { cleanse(pending_); }

void SecretScrubber::Stream::feed(std::string_view in, std::string& out) {
  if (!s_.armed()) {
    out.append(in);
    return;
  }
  // One copy: the held-back bytes and the new ones go to `out`, the
  // automaton runs over the new ones there, matches are overwritten in
  // place, and the tail that may still start a match moves back to pending_.
  const size_t base = out.size();
  out.append(pending_);
  const size_t scan = out.size();
  out.append(in);
  cleanse(pending_);
  const size_t k = s_.classes_;
  const uint32_t* next = s_.next_.data();
  const uint8_t* class_of = s_.class_of_;
  uint32_t row = state_ * static_cast<uint32_t>(k);
  char* data = out.data();
  for (size_t i = scan; i < out.size(); ++i) {
    const uint32_t t = next[row + class_of[static_cast<unsigned char>(data[i])]];
    row = t & ~kMatchFlag;
    if (!(t & kMatchFlag)) [[likely]]
      continue;
    const uint32_t state = row / static_cast<uint32_t>(k);
    // The automaton saw the original bytes; the match may start in bytes
    // held back from the previous feed, never in bytes already emitted.
    const size_t len = s_.match_len_[state], start = i + 1 - len;
    const uint64_t abs_start = consumed_ + start - scan, abs_end = consumed_ + i + 1 - scan;
    // A match overlapping the previous one continues its marker, so the
    // redacted run reads "zn-redacted-zn-..." from its first byte.
    if (abs_start >= run_end_) run_start_ = abs_start;
    run_end_ = abs_end;
    for (size_t j = start; j <= i; ++j)
      data[j] = kMarker[(consumed_ + j - scan - run_start_) % kMarker.size()];
    report_.matches++;
    report_.encodings |= s_.match_enc_[state];
    report_.secrets |= s_.match_sec_[state];
  }
  const uint32_t state = row / static_cast<uint32_t>(k);
  state_ = state;
  consumed_ += in.size();
  // A later match can only start inside the current partial match, and
  // never as far back as the longest pattern (it would be longer still).
  const size_t hold = std::min<size_t>({s_.depth_[state], s_.longest_ - 1, out.size() - base});
  pending_.assign(out, out.size() - hold, hold);
  OPENSSL_cleanse(out.data() + out.size() - hold, hold);
  out.resize(out.size() - hold);
}

void SecretScrubber::Stream::finish(std::string& out) {
  out.append(pending_);
  cleanse(pending_);
  state_ = 0;
  consumed_ = run_start_ = run_end_ = 0;
}

ScrubReport SecretScrubber::scrub(std::string& buf) const {
  if (!armed()) return {};
  Stream s(*this);
  std::string out;
  out.reserve(buf.size());
  s.feed(buf, out);
  s.finish(out);
  cleanse(buf);
  buf = std::move(out);
  return s.report();
}

}  // namespace zn::proxy
