#include "userspace/proxy/secret_scrubber.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "userspace/proxy/byte_set_scan.h"

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
  unsigned char bytes[4];
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
    out.append(reinterpret_cast<const char*>(bytes), encode_utf8(cp, bytes));
  }
  OPENSSL_cleanse(bytes, sizeof bytes);
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
    case SecretEncoding::kDecoded:
      return "decoded";
    case SecretEncoding::kSplit:
      return "split";
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

namespace {

// The code points' UTF-16 (LE or BE) or UTF-32 units with their zero bytes
// dropped, as the canonical view reads text in those encodings.
std::string narrowed(const std::vector<uint32_t>& cps, bool utf32, bool big_endian) {
  std::string out;
  auto unit = [&](uint32_t u, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      const int shift = big_endian ? 8 * (bytes - 1 - i) : 8 * i;
      const auto b = static_cast<unsigned char>(u >> shift);
      if (b != 0 && b != '\r' && b != '\n') out.push_back(static_cast<char>(b));
    }
  };
  for (uint32_t cp : cps) {
    if (utf32) {
      unit(cp, 4);
    } else if (cp >= 0x10000) {
      unit(0xd800 + ((cp - 0x10000) >> 10), 2);
      unit(0xdc00 + ((cp - 0x10000) & 0x3ff), 2);
    } else {
      unit(cp, 2);
    }
  }
  return out;
}

}  // namespace

std::vector<SecretPattern> canonical_patterns(std::string_view secret) {
  std::vector<SecretPattern> out;
  if (secret.size() < SecretScrubber::kMinEncodedSecret) return out;
  auto add = [&](std::string bytes) {
    const bool ok =
        bytes.size() >= SecretScrubber::kMinEncodedSecret &&
        std::none_of(out.begin(), out.end(), [&](const SecretPattern& p) { return p.bytes == bytes; });
    if (ok) {
      out.push_back({std::move(bytes), SecretEncoding::kDecoded});
    } else {
      cleanse(bytes);
    }
  };
  std::string plain;
  for (char c : secret)
    if (c != '\0' && c != '\r' && c != '\n') plain.push_back(c);
  for (char space : {' ', '+', '_'}) {
    std::string s = plain;
    std::replace(s.begin(), s.end(), ' ', space);
    add(std::move(s));
  }
  cleanse(plain);
  add(canonical(secret, Canonicaliser::Mode::kEscapes));
  add(canonical(secret, Canonicaliser::Mode::kQuotedPrintable));
  if (auto cps = utf8_code_points(secret)) {
    for (bool utf32 : {false, true})
      for (bool be : {false, true}) add(narrowed(*cps, utf32, be));
    cleanse(*cps);
  }
  return out;
}

// The automaton: states 0..n-1, root 0; next_[state * classes_ + class] is
// the target state's row (target * classes_), | kMatchFlag when a pattern
// ends at the target. Every table spells the secrets: wiped when it goes.
namespace {
std::atomic<uint64_t> g_automata_built{0};
constexpr uint32_t kMatchFlag = 0x80000000u;

// A pair of bytes in a 65,536-bit table (Automaton::pairs_): its word and bit.
struct PairBit {
  size_t word;
  uint64_t bit;
};
PairBit pair_bit(unsigned char a, unsigned char b) {
  const size_t ab = size_t{a} << 8 | b;
  return {ab >> 6, uint64_t{1} << (ab & 63)};
}
bool has_pair(const uint64_t* table, unsigned char a, unsigned char b) {
  const PairBit p = pair_bit(a, b);
  return (table[p.word] & p.bit) != 0;
}
}  // namespace

struct SecretScrubber::Automaton {
  Automaton(std::vector<std::string> secrets, std::vector<std::string> labels)
      : secrets_(std::move(secrets)), labels_(std::move(labels)) {
    build();
    g_automata_built.fetch_add(1, std::memory_order_relaxed);
  }
  ~Automaton();
  Automaton(const Automaton&) = delete;
  Automaton& operator=(const Automaton&) = delete;
  bool armed() const { return !secrets_.empty(); }

  std::vector<std::string> secrets_, labels_;
  uint8_t class_of_[256] = {};
  size_t classes_ = 1;
  std::vector<uint32_t> next_;
  std::vector<uint16_t> depth_;      // length of the prefix a state stands for
  std::vector<uint16_t> match_len_;  // longest pattern ending here, 0 if none
  std::vector<uint32_t> match_enc_;  // encodings of the patterns ending here
  std::vector<uint64_t> match_sec_;  // secrets of the patterns ending here
  std::vector<uint8_t> boundary_;    // boundary_redaction() of each state
  size_t longest_ = 0;
  size_t pattern_count_ = 0;
  // Every pair of bytes that follow each other inside some pattern (bit
  // a << 8 | b). Where two bytes of a text are not such a pair, no match of
  // two bytes or more ends at the second and the automaton's state after it
  // is the root's step on that byte alone: the scan runs the automaton only
  // through runs of such pairs (Stream::scan_identity, scan_view).
  std::vector<uint64_t> pairs_;
  bool pairs_usable_ = false;         // every pattern has two bytes or more
  ByteSet pair_first_, pair_second_;  // the bytes of those pairs: the prefilter

  bool pair(unsigned char a, unsigned char b) const { return has_pair(pairs_.data(), a, b); }
  // The state (row offset) after a byte that follows a byte it is not a
  // pair with.
  uint32_t after_break(unsigned char b) const { return next_[class_of_[b]] & ~kMatchFlag; }

 private:
  void build();
};

namespace {

// The automata alive, by their list of secrets and labels: a scrubber armed
// with a list another holds takes that one instead of building its own (an
// HTTP/2 connection's streams and a session's connections arm with the same
// list). Weak references: an automaton lives as long as its scrubbers and
// streams, and the few most recently armed a little longer (warm_,
// SecretScrubber::kWarmAutomata). Built outside the lock; two that race
// keep the first.
class AutomatonCache {
 public:
  using Ptr = std::shared_ptr<const SecretScrubber::Automaton>;

  Ptr get(std::vector<std::string> secrets, std::vector<std::string> labels) {
    const uint64_t key = key_of(secrets, labels);
    if (Ptr found = find(key, secrets, labels)) {
      for (std::string& s : secrets) cleanse(s);
      return found;
    }
    auto built = std::make_shared<const SecretScrubber::Automaton>(std::move(secrets), std::move(labels));
    std::vector<Ptr> dropped;  // let go after the lock: the last one wipes
    std::lock_guard lock(mu_);
    if (Ptr found = find_locked(key, built->secrets_, built->labels_)) {
      keep_warm_locked(found, dropped);
      return found;
    }
    if (++inserts_ % 256 == 0) std::erase_if(alive_, [](const auto& e) { return e.second.expired(); });
    alive_.emplace(key, built);
    keep_warm_locked(built, dropped);
    return built;
  }

  void forget_warm() {
    std::deque<std::pair<Clock::time_point, Ptr>> dropped;
    std::lock_guard lock(mu_);
    dropped.swap(warm_);
  }

 private:
  static uint64_t key_of(const std::vector<std::string>& secrets, const std::vector<std::string>& labels) {
    uint64_t h = secrets.size();
    for (const auto* list : {&secrets, &labels})
      for (const std::string& s : *list) h = (h ^ std::hash<std::string_view>{}(s)) * 0x100000001b3ull + 1;
    return h;
  }
  using Clock = std::chrono::steady_clock;

  Ptr find(uint64_t key, const std::vector<std::string>& secrets, const std::vector<std::string>& labels) {
    std::vector<Ptr> dropped;
    std::lock_guard lock(mu_);
    Ptr found = find_locked(key, secrets, labels);
    if (found) keep_warm_locked(found, dropped);
    return found;
  }
  // `p` to the front of the warm list; the expired and the surplus out (to
  // `dropped`, released by the caller after the lock).
  void keep_warm_locked(const Ptr& p, std::vector<Ptr>& dropped) {
    const Clock::time_point now = Clock::now();
    for (auto it = warm_.begin(); it != warm_.end();) {
      if (it->second == p || now - it->first > SecretScrubber::kWarmFor) {
        dropped.push_back(std::move(it->second));
        it = warm_.erase(it);
      } else {
        ++it;
      }
    }
    warm_.emplace_front(now, p);
    while (warm_.size() > SecretScrubber::kWarmAutomata) {
      dropped.push_back(std::move(warm_.back().second));
      warm_.pop_back();
    }
  }
  Ptr find_locked(uint64_t key, const std::vector<std::string>& secrets,
                  const std::vector<std::string>& labels) {
    auto [from, to] = alive_.equal_range(key);
    for (auto it = from; it != to;) {
      Ptr p = it->second.lock();
      if (!p) {
        it = alive_.erase(it);
        continue;
      }
      if (p->secrets_ == secrets && p->labels_ == labels) return p;
      ++it;
    }
    return nullptr;
  }

  std::mutex mu_;
  std::unordered_multimap<uint64_t, std::weak_ptr<const SecretScrubber::Automaton>> alive_;
  uint64_t inserts_ = 0;
  std::deque<std::pair<Clock::time_point, Ptr>> warm_;  // most recent first
};

AutomatonCache& automata() {
  static AutomatonCache cache;
  return cache;
}

}  // namespace

SecretScrubber::Automaton::~Automaton() {
  for (std::string& s : secrets_) cleanse(s);
  cleanse(next_);
  cleanse(depth_);
  cleanse(match_len_);
  cleanse(match_enc_);
  cleanse(match_sec_);
  cleanse(boundary_);
  cleanse(pairs_);
  OPENSSL_cleanse(&pair_first_, sizeof pair_first_);
  OPENSSL_cleanse(&pair_second_, sizeof pair_second_);
  OPENSSL_cleanse(class_of_, sizeof class_of_);
}

SecretScrubber::SecretScrubber() = default;
SecretScrubber::~SecretScrubber() = default;

bool SecretScrubber::armed() const { return a_ && a_->armed(); }
size_t SecretScrubber::longest() const { return a_ ? a_->longest_ : 0; }
size_t SecretScrubber::patterns() const { return a_ ? a_->pattern_count_ : 0; }
size_t SecretScrubber::states() const { return a_ ? a_->depth_.size() : 0; }
const std::string& SecretScrubber::label(size_t i) const { return a_->labels_[i]; }
size_t SecretScrubber::secret_count() const { return a_ ? a_->secrets_.size() : 0; }
size_t SecretScrubber::boundary_redaction(uint32_t state) const { return a_->boundary_[state]; }
void SecretScrubber::clear() { a_.reset(); }

void SecretScrubber::forget_warm() { automata().forget_warm(); }

uint64_t SecretScrubber::automata_built() { return g_automata_built.load(std::memory_order_relaxed); }

bool SecretScrubber::add_secret(std::string_view secret, std::string_view label) {
  return add_secrets({{secret, label}});
}

bool SecretScrubber::add_secrets(const std::vector<std::pair<std::string_view, std::string_view>>& list) {
  std::vector<std::string> secrets, labels;
  if (a_) {
    secrets = a_->secrets_;
    labels = a_->labels_;
  }
  const size_t had = secrets.size();
  bool ok = true;
  for (const auto& [secret, label] : list) {
    if (secret.empty() || secret.size() > kMaxSecretBytes) {
      ok = false;
    } else if (std::find(secrets.begin(), secrets.end(), secret) == secrets.end()) {
      if (secrets.size() >= kMaxSecrets) {
        ok = false;
      } else {
        secrets.emplace_back(secret);
        labels.emplace_back(label);
      }
    }
  }
  if (secrets.size() == had) {
    for (std::string& s : secrets) cleanse(s);
    return ok;
  }
  std::shared_ptr<const Automaton> next = automata().get(std::move(secrets), std::move(labels));
  if (next->next_.size() <= kMaxTableEntries) {
    a_ = std::move(next);
    return ok;
  }
  // Too big to hold: one secret alone is refused (the caller must not
  // inject it); several are taken one at a time, each that does not fit
  // refused.
  next.reset();
  if (list.size() == 1) return false;
  for (const auto& item : list) ok = add_secrets({item}) && ok;
  return ok;
}

void SecretScrubber::Automaton::build() {
  struct Owned {
    SecretPattern p;
    size_t secret;
  };
  std::vector<Owned> all;
  for (size_t i = 0; i < secrets_.size(); ++i) {
    const auto first = static_cast<std::ptrdiff_t>(all.size());
    for (SecretPattern& p : secret_patterns(secrets_[i])) all.push_back({std::move(p), i});
    for (SecretPattern& p : canonical_patterns(secrets_[i])) {
      // One finding under one name: a canonical form that is also a
      // spelling as sent is that spelling.
      const bool dup =
          std::any_of(all.begin() + first, all.end(), [&](const Owned& o) { return o.p.bytes == p.bytes; });
      if (dup) {
        cleanse(p.bytes);
      } else {
        all.push_back({std::move(p), i});
      }
    }
  }
  // Byte classes: each byte that occurs in a pattern gets its own column,
  // every other byte shares column 0, which always leads back to the root.
  for (const Owned& o : all)
    for (unsigned char c : o.p.bytes)
      if (class_of_[c] == 0) class_of_[c] = static_cast<uint8_t>(classes_++);
  const size_t k = classes_;
  constexpr uint32_t kNone = UINT32_MAX;
  // The shortest pattern each state is a prefix of.
  std::vector<uint16_t> min_len;
  auto new_state = [&](uint16_t depth) {
    next_.resize(next_.size() + k, kNone);
    depth_.push_back(depth);
    match_len_.push_back(0);
    match_enc_.push_back(0);
    match_sec_.push_back(0);
    min_len.push_back(UINT16_MAX);
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
      min_len[s] = static_cast<uint16_t>(std::min<size_t>(min_len[s], o.p.bytes.size()));
    }
    match_len_[s] = static_cast<uint16_t>(std::max<size_t>(match_len_[s], o.p.bytes.size()));
    match_enc_[s] |= 1u << static_cast<unsigned>(o.p.encoding);
    match_sec_[s] |= uint64_t{1} << o.secret;
    longest_ = std::max(longest_, o.p.bytes.size());
  }
  pattern_count_ = all.size();
  pairs_.assign(size_t{1} << 10, 0);
  pairs_usable_ = !all.empty();
  for (const Owned& o : all) {
    if (o.p.bytes.size() < 2) pairs_usable_ = false;
    for (size_t i = 1; i < o.p.bytes.size(); ++i) {
      const auto a = static_cast<unsigned char>(o.p.bytes[i - 1]),
                 b = static_cast<unsigned char>(o.p.bytes[i]);
      const PairBit p = pair_bit(a, b);
      pairs_[p.word] |= p.bit;
      pair_first_.add(a);
      pair_second_.add(b);
    }
  }
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
  boundary_.resize(depth_.size());
  for (size_t st = 0; st < depth_.size(); ++st)
    boundary_[st] =
        static_cast<uint8_t>(std::min<size_t>(kMarker.size(), std::max<size_t>(4, min_len[st] / 2)));
  cleanse(min_len);
  // The hot loop's form: each entry is the target's row offset (state * k),
  // flagged when a pattern ends there, so one load per byte and no multiply
  // on the dependency chain.
  for (uint32_t& t : next_) t = static_cast<uint32_t>(t * k) | (match_len_[t] != 0 ? kMatchFlag : 0);
}

namespace {
// A stream of a scrubber with no secret: it passes bytes through.
const std::shared_ptr<const SecretScrubber::Automaton>& unarmed() {
  static const auto none = std::make_shared<const SecretScrubber::Automaton>(std::vector<std::string>{},
                                                                             std::vector<std::string>{});
  return none;
}
}  // namespace

SecretScrubber::Stream::Stream(const SecretScrubber& s, Mode mode)
    : a_(s.a_ ? s.a_ : unarmed()), s_(*a_), mode_(mode) {
  if (!s_.armed()) return;
  size_t ring = 1;
  while (ring < s_.longest_ + 1) ring <<= 1;
  escapes_.ring.assign(ring, 0);
  qp_.ring.assign(ring, 0);
  ring_mask_ = ring - 1;
}

SecretScrubber::Stream::~Stream() {
  cleanse(pending_);
  escapes_.canon.reset();
  qp_.canon.reset();
}

void SecretScrubber::Stream::reset() {
  cleanse(pending_);
  row_ = 0;
  base_ = consumed_ = 0;
  for (View* v : {&escapes_, &qp_}) {
    v->canon.reset();
    v->row = 0;
    v->count = 0;
    v->synced = false;
  }
  runs_.clear();
}

void SecretScrubber::Stream::redact(uint64_t start, uint64_t end) {
  // Merged into the runs it overlaps or touches: a run reads
  // "zn-redacted-zn-..." from its first byte, whichever view found which part.
  auto it = std::lower_bound(runs_.begin(), runs_.end(), std::pair{start, uint64_t{0}});
  if (it != runs_.begin() && std::prev(it)->second >= start) --it;
  auto last = it;
  while (last != runs_.end() && last->first <= end) {
    start = std::min(start, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  it = runs_.erase(it, last);
  runs_.insert(it, {start, end});
}

void SecretScrubber::Stream::matched(uint32_t state, uint64_t start, uint64_t end, bool canonical) {
  if (matches_out_) matches_out_->emplace_back(start, end);
  uint32_t enc = s_.match_enc_[state];
  if (canonical) {
    // Already redacted as sent (the same bytes, a standard spelling): one
    // finding, counted once; whose it is is still reported (the screen
    // exempts by secret).
    const bool covered = std::any_of(runs_.begin(), runs_.end(), [&](const std::pair<uint64_t, uint64_t>& r) {
      return r.first <= start && end <= r.second;
    });
    if (covered) {
      report_.secrets |= s_.match_sec_[state];
      return;
    }
    enc = (enc & ~(1u << static_cast<unsigned>(SecretEncoding::kRaw))) |
          (1u << static_cast<unsigned>(SecretEncoding::kDecoded));
  }
  report_.matches++;
  report_.encodings |= enc;
  report_.secrets |= s_.match_sec_[state];
  redact(start, end);
}

namespace {
// The bytes that are not plain in each canonical view (canonical_view.h).
const ByteSet& not_plain(Canonicaliser::Mode mode) {
  static const auto sets = [] {
    std::array<ByteSet, 2> out;
    for (int c = 0; c < 256; ++c)
      for (auto m : {Canonicaliser::Mode::kEscapes, Canonicaliser::Mode::kQuotedPrintable})
        if (!Canonicaliser(m).plain(static_cast<unsigned char>(c)))
          out[static_cast<size_t>(m)].add(static_cast<unsigned char>(c));
    return out;
  }();
  return sets[static_cast<size_t>(mode)];
}
}  // namespace

void SecretScrubber::Stream::mark(size_t from) {
  // The prefilter of the feed's bytes [from, n): where a pattern pair ends
  // (the candidates, a first byte of some pair then a second, each checked;
  // the feed's first byte is stepped anyway) and the bytes not plain in
  // each view.
  const unsigned char* d = reinterpret_cast<const unsigned char*>(pending_.data()) + from;
  const size_t n = pending_.size() - from, words = (n + 63) / 64;
  for (auto* m : {&pair_marks_, &first_marks_, &escape_marks_, &qp_marks_}) m->resize(words);
  s_.pair_first_.mark(d, n, first_marks_.data());
  s_.pair_second_.mark(d, n, pair_marks_.data());
  const uint64_t* table = s_.pairs_.data();
  uint64_t* marks = pair_marks_.data();
  const uint64_t* firsts = first_marks_.data();
  uint64_t carry = 0;
  for (size_t w = 0; w < words; ++w) {
    uint64_t candidates = marks[w] & (firsts[w] << 1 | carry), pairs = 0;
    carry = firsts[w] >> 63;
    const unsigned char* base = d + w * 64;
    while (candidates != 0) {
      const auto bit = static_cast<unsigned>(__builtin_ctzll(candidates));
      candidates &= candidates - 1;
      // bit >= 1 or w >= 1: the first byte is never a candidate
      pairs |= uint64_t{has_pair(table, base[static_cast<ptrdiff_t>(bit) - 1], base[bit])} << bit;
    }
    marks[w] = pairs;
  }
  not_plain(Canonicaliser::Mode::kEscapes).mark(d, n, escape_marks_.data());
  not_plain(Canonicaliser::Mode::kQuotedPrintable).mark(d, n, qp_marks_.data());
}

void SecretScrubber::Stream::scan_identity(size_t from) {
  // The automaton runs only through runs of pattern pairs (Automaton::pairs_):
  // between them, the state after each byte is the root's step on it, and
  // no match ends there.
  if (!skip_ || !s_.pairs_usable_) return scan_identity_every_byte(from);
  const size_t k = s_.classes_;
  const uint32_t* next = s_.next_.data();
  const uint8_t* class_of = s_.class_of_;
  const unsigned char* d = reinterpret_cast<const unsigned char*>(pending_.data());
  const size_t n = pending_.size();
  uint32_t row = row_;
  auto step = [&](size_t i) {
    const uint32_t t = next[row + class_of[d[i]]];
    row = t & ~kMatchFlag;
    if (t & kMatchFlag) [[unlikely]] {
      const uint32_t state = row / static_cast<uint32_t>(k);
      const uint64_t end = base_ + i + 1;
      matched(state, end - s_.match_len_[state], end, false);
    }
  };
  const uint64_t* pairs = pair_marks_.data();
  // The feed's first byte follows row_; each later one that is not a pair
  // with the byte before it puts the automaton in the root's step on it.
  size_t i = from;
  if (i < n) step(i++);
  while (i < n) {
    size_t j = from + next_mark(pairs, i - from, n - from);
    if (j > i) row = s_.after_break(d[j - 1]);
    for (; j < n && ((pairs[(j - from) / 64] >> ((j - from) % 64)) & 1); ++j) step(j);
    i = j;
  }
  row_ = row;
}

void SecretScrubber::Stream::scan_identity_every_byte(size_t from) {
  const size_t k = s_.classes_;
  const uint32_t* next = s_.next_.data();
  const uint8_t* class_of = s_.class_of_;
  uint32_t row = row_;
  const char* data = pending_.data();
  for (size_t i = from; i < pending_.size(); ++i) {
    const uint32_t t = next[row + class_of[static_cast<unsigned char>(data[i])]];
    row = t & ~kMatchFlag;
    if (!(t & kMatchFlag)) [[likely]]
      continue;
    const uint32_t state = row / static_cast<uint32_t>(k);
    const uint64_t end = base_ + i + 1;
    matched(state, end - s_.match_len_[state], end, false);
  }
  row_ = row;
}

uint32_t SecretScrubber::Stream::as_sent_after(size_t p, size_t from) const {
  // Back to the last byte that is not a pattern pair with the one before it
  // (its state is the root's step on it), then forward; a feed's first byte
  // follows row_before_.
  const unsigned char* d = reinterpret_cast<const unsigned char*>(pending_.data());
  size_t k = p;
  while (k > from && s_.pair(d[k - 1], d[k])) --k;
  uint32_t row = k > from ? s_.after_break(d[k]) : s_.next_[row_before_ + s_.class_of_[d[k]]] & ~kMatchFlag;
  for (size_t q = k + 1; q <= p; ++q) row = s_.next_[row + s_.class_of_[d[q]]] & ~kMatchFlag;
  return row;
}

void SecretScrubber::Stream::leave_sync(View& v, size_t from, size_t skipped_from, size_t to) {
  // The view skipped the plain bytes [skipped_from, to) in the as-sent
  // view's state: it takes that state after them, and the source positions
  // of its prefix (all inside the skipped run or before it, where the view
  // stepped).
  if (to == skipped_from) return;
  const size_t skipped = to - skipped_from;
  v.count += skipped;
  v.row = to == pending_.size() ? row_ : as_sent_after(to - 1, from);
  const size_t depth = s_.depth_[v.row / static_cast<uint32_t>(s_.classes_)];
  for (size_t q = to - std::min(depth, skipped); q < to; ++q)
    v.ring[(v.count - (to - q)) & ring_mask_] = base_ + q;
  v.canon.took_plain();
}

void SecretScrubber::Stream::step(View& v, int b, uint64_t start, uint64_t end) {
  if (b < 0) {
    v.row = 0;  // a long run of dropped bytes: no match spans it
    return;
  }
  v.ring[v.count & ring_mask_] = start;
  ++v.count;
  const uint32_t t = s_.next_[v.row + s_.class_of_[b]];
  v.row = t & ~kMatchFlag;
  if (!(t & kMatchFlag)) return;
  const uint32_t state = v.row / static_cast<uint32_t>(s_.classes_);
  matched(state, v.ring[(v.count - s_.match_len_[state]) & ring_mask_], end, true);
}

void SecretScrubber::Stream::scan_view(View& v, size_t from) {
  // A canonical view reads what the as-sent view reads inside a run of
  // plain bytes (no escape lead, no byte to drop, no escape pending). Once
  // both have read two plain bytes that are not a pattern pair, both are in
  // the root's step on the second and stay in one state to the run's end;
  // every match the view would find there is one the as-sent view found
  // (the same source bytes, already redacted and reported). So the view
  // runs its automaton only from a byte that is not plain until it is back
  // in step, and skips the rest of each run.
  if (!skip_ || !s_.pairs_usable_) return scan_view_every_byte(v, from);
  const uint32_t k = static_cast<uint32_t>(s_.classes_);
  const uint32_t* next = s_.next_.data();
  const uint8_t* class_of = s_.class_of_;
  const unsigned char* d = reinterpret_cast<const unsigned char*>(pending_.data());
  const size_t n = pending_.size();
  const uint64_t* not_plain = (&v == &escapes_ ? escape_marks_ : qp_marks_).data();
  const Canonicaliser::Mode mode =
      &v == &escapes_ ? Canonicaliser::Mode::kEscapes : Canonicaliser::Mode::kQuotedPrintable;
  bool prev_plain = false;  // byte i - 1 was taken as itself, the view idle
  size_t i = from;
  while (i < n) {
    if (v.synced) {
      // Skipping from `start`: plain bytes, leads given up at once (their
      // own canonical byte, as sent) and a few dropped bytes between two
      // plain bytes that are not a pattern pair, either as the view reads
      // them or as sent (both views then in the root's step on the second).
      size_t start = i, j;
      for (;;) {
        j = from + next_mark(not_plain, i - from, n - from);
        if (j + 1 >= n) break;
        const unsigned char c = d[j];
        if (!Canonicaliser::dropped(c)) {
          if (!Canonicaliser::literal_lead(mode, c, d[j + 1])) break;
          i = j + 1;
          continue;
        }
        // Dropped bytes [j, b), then b plain. The view's last canonical byte
        // is d[j - 1] (skipped bytes are plain, given-up leads or such a b;
        // checked all the same). A run long enough to break the view
        // (kMaxDropped) changes nothing here: the view would be at the root
        // before b, and the root's step on b is where it is after a, b.
        size_t b = j;
        while (b < n && Canonicaliser::dropped(d[b])) ++b;
        if (j == from || b >= n || !v.canon.plain(d[b]) || Canonicaliser::dropped(d[j - 1]) ||
            s_.pair(d[j - 1], d[b]) || s_.pair(d[b - 1], d[b]))
          break;
        v.count += j - start;  // the canonical bytes before the dropped ones
        start = i = b;
      }
      leave_sync(v, from, start, j);
      if (j == n) return;
      v.synced = false;
      i = j;
    }
    const unsigned char c = d[i];
    if (v.canon.idle() && Canonicaliser::dropped(c)) {
      // A run of dropped bytes at once (a body of zeros, UTF-16's NULs).
      size_t b = i + 1;
      while (b + 8 <= n) {  // zeros, eight at a time
        uint64_t word;
        std::memcpy(&word, d + b, 8);
        if (word != 0) break;
        b += 8;
      }
      while (b < n && Canonicaliser::dropped(d[b])) ++b;
      if (v.canon.take_dropped(b - i)) v.row = 0;
      prev_plain = false;
      i = b;
      continue;
    }
    if (v.canon.idle() && v.canon.plain(c)) {
      v.ring[v.count & ring_mask_] = base_ + i;
      ++v.count;
      const uint32_t t = next[v.row + class_of[c]];
      v.row = t & ~kMatchFlag;
      v.canon.took_plain();
      if (t & kMatchFlag) [[unlikely]] {
        const uint32_t state = v.row / k;
        matched(state, v.ring[(v.count - s_.match_len_[state]) & ring_mask_], base_ + i + 1, true);
      }
      if (prev_plain && !s_.pair(d[i - 1], c)) {
        v.synced = true;
      }
      prev_plain = true;
    } else {
      v.canon.push(c, base_ + i, [this, &v](int b, uint64_t start, uint64_t end) { step(v, b, start, end); });
      prev_plain = false;
    }
    ++i;
  }
}

void SecretScrubber::Stream::scan_view_every_byte(View& v, size_t from) {
  for (size_t i = from; i < pending_.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(pending_[i]);
    if (v.canon.idle() && v.canon.plain(c)) {
      v.canon.took_plain();
      step(v, c, base_ + i, base_ + i + 1);
    } else {
      v.canon.push(c, base_ + i, [this, &v](int b, uint64_t start, uint64_t end) { step(v, b, start, end); });
    }
  }
}

uint64_t SecretScrubber::Stream::hold_from() const {
  const uint32_t k = static_cast<uint32_t>(s_.classes_);
  uint64_t from = consumed_ - s_.depth_[row_ / k];
  for (const View* v : {&escapes_, &qp_}) {
    const size_t depth = s_.depth_[v->row / k];
    if (depth > 0) from = std::min(from, v->ring[(v->count - depth) & ring_mask_]);
    from = std::min(from, v->canon.pending_from());
  }
  return std::max(from, base_);
}

void SecretScrubber::Stream::emit_until(uint64_t to, std::string& out) {
  const size_t n = static_cast<size_t>(to - base_);
  if (mode_ == Mode::kRedact) {
    for (const auto& [start, end] : runs_) {
      if (start >= to) break;
      for (uint64_t p = std::max(start, base_); p < std::min(end, to); ++p) {
        char& c = pending_[static_cast<size_t>(p - base_)];
        // Line breaks and NULs stay: a head keeps its lines, a wrapped body
        // its shape, UTF-16 its width.
        if (c != '\r' && c != '\n' && c != '\0') c = kMarker[(p - start) % kMarker.size()];
      }
    }
  }
  // Runs all out are forgotten; one that reaches `to` stays, as a match
  // found later that touches it continues its marker.
  runs_.erase(runs_.begin(),
              std::find_if(runs_.begin(), runs_.end(),
                           [&](const std::pair<uint64_t, uint64_t>& r) { return r.second >= to; }));
  out.append(pending_, 0, n);
  OPENSSL_cleanse(pending_.data(), n);
  pending_.erase(0, n);
  base_ = to;
}

void SecretScrubber::Stream::feed(std::string_view in, std::string& out) {
  if (!s_.armed()) {
    out.append(in);
    return;
  }
  const size_t from = pending_.size();
  pending_.append(in);
  consumed_ += in.size();
  row_before_ = row_;
  if (skip_ && s_.pairs_usable_) mark(from);
  // The as-sent view first: a canonical match of the same bytes is then
  // known as the same finding.
  scan_identity(from);
  scan_view(escapes_, from);
  scan_view(qp_, from);
  emit_until(hold_from(), out);
}

void SecretScrubber::Stream::end_message(std::string& out) {
  if (!s_.armed()) return;
  if (mode_ == Mode::kDetect) {
    emit_until(consumed_, out);
    return;
  }
  const uint32_t k = static_cast<uint32_t>(s_.classes_);
  auto partial = [&](uint32_t row, uint64_t start) {
    const uint32_t state = row / k;
    if (s_.depth_[state] == 0 || s_.depth_[state] < s_.boundary_[state]) return;
    report_.matches++;
    report_.encodings |= 1u << static_cast<unsigned>(SecretEncoding::kSplit);
    redact(start, consumed_);
  };
  partial(row_, consumed_ - s_.depth_[row_ / k]);
  for (View* v : {&escapes_, &qp_}) {
    const size_t depth = s_.depth_[v->row / k];
    if (depth > 0) partial(v->row, v->ring[(v->count - depth) & ring_mask_]);
  }
  emit_until(consumed_, out);
}

void SecretScrubber::Stream::finish(std::string& out) {
  if (!s_.armed()) return;
  // An escape cut off by the end is literal: its bytes may still end a match.
  for (View* v : {&escapes_, &qp_})
    v->canon.flush([this, v](int b, uint64_t start, uint64_t end) { step(*v, b, start, end); });
  emit_until(consumed_, out);
  reset();
}

namespace {

// Each header's RFC 2231 continuations joined, searched like the rest; a
// match is redacted in the source bytes it was joined from.
void scrub_continuations(const SecretScrubber& s, std::string& buf, bool redact, ScrubReport& report) {
  for (JoinedParameter& j : parameter_continuations(buf)) {
    SecretScrubber::Stream stream(
        s, redact ? SecretScrubber::Stream::Mode::kRedact : SecretScrubber::Stream::Mode::kDetect);
    std::string out;
    stream.feed(j.value, out);
    stream.finish(out);
    if (stream.report().matches > 0) {
      report.merge(stream.report());
      if (redact)
        for (size_t i = 0; i < out.size() && i < j.at.size(); ++i) buf[j.at[i]] = out[i];
    }
    cleanse(out);
    cleanse(j.value);
  }
}

}  // namespace

ScrubReport SecretScrubber::scrub(std::string& buf) const {
  if (!armed()) return {};
  Stream s(*this);
  std::string out;
  out.reserve(buf.size());
  s.feed(buf, out);
  s.finish(out);
  cleanse(buf);
  buf = std::move(out);
  ScrubReport report = s.report();
  if (buf.find('*') != std::string::npos) scrub_continuations(*this, buf, true, report);
  return report;
}

ScrubReport SecretScrubber::detect(std::string_view buf) const {
  if (!armed()) return {};
  Stream s(*this, Stream::Mode::kDetect);
  std::string out;
  out.reserve(buf.size());
  s.feed(buf, out);
  s.finish(out);
  cleanse(out);
  ScrubReport report = s.report();
  if (buf.find('*') != std::string_view::npos) {
    std::string copy(buf);
    scrub_continuations(*this, copy, false, report);
    cleanse(copy);
  }
  return report;
}

}  // namespace zn::proxy
