#include "userspace/proxy/canonical_view.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <map>

namespace zn::proxy {

size_t encode_utf8(uint32_t cp, unsigned char out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<unsigned char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<unsigned char>(0xc0 | (cp >> 6));
    out[1] = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<unsigned char>(0xe0 | (cp >> 12));
    out[1] = static_cast<unsigned char>(0x80 | ((cp >> 6) & 0x3f));
    out[2] = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = static_cast<unsigned char>(0xf0 | (cp >> 18));
  out[1] = static_cast<unsigned char>(0x80 | ((cp >> 12) & 0x3f));
  out[2] = static_cast<unsigned char>(0x80 | ((cp >> 6) & 0x3f));
  out[3] = static_cast<unsigned char>(0x80 | (cp & 0x3f));
  return 4;
}
namespace {

int hex(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint32_t hex_value(const unsigned char* s, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v * 16 + static_cast<uint32_t>(hex(s[i]));
  return v;
}

bool scalar(uint32_t cp) { return cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff); }

unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? static_cast<unsigned char>(c + 32) : c; }

struct Named {
  std::string_view name;
  unsigned char byte;
};
constexpr Named kNamed[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};

}  // namespace

Canonicaliser::~Canonicaliser() { reset(); }

void Canonicaliser::reset() {
  OPENSSL_cleanse(esc_, sizeof esc_);
  len_ = 0;
  dropped_ = 0;
  cp_ = 0;
}

Canonicaliser::Verdict Canonicaliser::judge() {
  const unsigned char* e = esc_;
  const size_t n = len_;
  const unsigned char last = e[n - 1];
  byte_ = false;
  soft_break_ = false;
  auto done_byte = [&](uint32_t b) {
    cp_ = b;
    byte_ = true;
    return Verdict::kComplete;
  };
  auto done_cp = [&](uint32_t cp) {
    if (!scalar(cp)) return Verdict::kInvalid;
    cp_ = cp;
    return Verdict::kComplete;
  };
  if (n == 1) return Verdict::kPrefix;
  if (mode_ == Mode::kQuotedPrintable) {
    // =HH, =CRLF, =LF
    if (n == 2) {
      if (last == '\n') {
        soft_break_ = true;
        return Verdict::kComplete;
      }
      return hex(last) >= 0 || last == '\r' ? Verdict::kPrefix : Verdict::kInvalid;
    }
    if (e[1] == '\r') {
      if (last != '\n') return Verdict::kInvalid;
      soft_break_ = true;
      return Verdict::kComplete;
    }
    return hex(last) >= 0 ? done_byte(hex_value(e + 1, 2)) : Verdict::kInvalid;
  }
  switch (e[0]) {
    case '%':
      if (hex(last) < 0) return Verdict::kInvalid;
      return n == 3 ? done_byte(hex_value(e + 1, 2)) : Verdict::kPrefix;
    case '\\': {
      if (n == 2) {
        switch (last) {
          case 'x':
          case 'u':
            return Verdict::kPrefix;
          case '"':
          case '\\':
          case '/':
          case '\'':
            return done_byte(last);
          case 'b':
            return done_byte('\b');
          case 'f':
            return done_byte('\f');
          case 'n':
            return done_byte('\n');
          case 'r':
            return done_byte('\r');
          case 't':
            return done_byte('\t');
          default:
            return Verdict::kInvalid;
        }
      }
      if (e[1] == 'x') {
        if (hex(last) < 0) return Verdict::kInvalid;
        return n == 4 ? done_byte(hex_value(e + 2, 2)) : Verdict::kPrefix;
      }
      // \uHHHH, perhaps \uD8xx\uDCxx
      if (n <= 6) {
        if (hex(last) < 0) return Verdict::kInvalid;
        if (n < 6) return Verdict::kPrefix;
        const uint32_t v = hex_value(e + 2, 4);
        if (v >= 0xd800 && v <= 0xdbff) return Verdict::kPrefix;
        return done_cp(v);
      }
      if (n == 7) return last == '\\' ? Verdict::kPrefix : Verdict::kInvalid;
      if (n == 8) return last == 'u' ? Verdict::kPrefix : Verdict::kInvalid;
      if (hex(last) < 0) return Verdict::kInvalid;
      if (n < 12) return Verdict::kPrefix;
      const uint32_t hi = hex_value(e + 2, 4), lo = hex_value(e + 8, 4);
      if (lo < 0xdc00 || lo > 0xdfff) return Verdict::kInvalid;
      return done_cp(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00));
    }
    case '&': {
      if (e[1] == '#') {
        if (n == 2) return Verdict::kPrefix;
        const bool hexa = e[2] == 'x' || e[2] == 'X';
        const size_t first = hexa ? 3 : 2, max_digits = hexa ? 6 : 7;
        if (n == 3 && hexa) return Verdict::kPrefix;
        const size_t digits = n - first;
        if (last == ';') {
          if (digits <= 1) return Verdict::kInvalid;  // "&#;" or "&#x;"
          uint32_t v = 0;
          for (size_t i = first; i + 1 < n; ++i) v = v * (hexa ? 16 : 10) + static_cast<uint32_t>(hex(e[i]));
          return done_cp(v);
        }
        const bool digit = hexa ? hex(last) >= 0 : (last >= '0' && last <= '9');
        return digit && digits <= max_digits ? Verdict::kPrefix : Verdict::kInvalid;
      }
      // &name;
      const size_t letters = n - 1 - (last == ';' ? 1 : 0);
      for (const Named& nm : kNamed) {
        if (letters > nm.name.size()) continue;
        bool same = true;
        for (size_t i = 0; i < letters && same; ++i)
          same = lower(e[1 + i]) == static_cast<unsigned char>(nm.name[i]);
        if (!same) continue;
        if (last != ';') return Verdict::kPrefix;
        if (letters == nm.name.size()) return done_byte(nm.byte);
      }
      return Verdict::kInvalid;
    }
    default:
      return Verdict::kInvalid;
  }
}

bool Canonicaliser::literal_lead(Mode mode, unsigned char lead, unsigned char next) {
  // [mode][lead][next]: 2 x 256 x 256 bits, probed at first use.
  static const std::vector<uint64_t> table = [] {
    std::vector<uint64_t> t(2 * 256 * 256 / 64, 0);
    for (Mode m : {Mode::kEscapes, Mode::kQuotedPrintable}) {
      Canonicaliser c(m);
      for (int l = 0; l < 256; ++l) {
        if (!c.is_lead(static_cast<unsigned char>(l))) continue;
        for (int x = 0; x < 256; ++x) {
          bool first = true, literal = false;
          auto emit = [&](int b, uint64_t start, uint64_t end) {
            if (first) literal = b == l && start == 0 && end == 1;
            first = false;
          };
          c.push(static_cast<unsigned char>(l), 0, emit);
          c.push(static_cast<unsigned char>(x), 1, emit);
          if (literal) {
            const size_t bit =
                (static_cast<size_t>(m) << 16) | static_cast<size_t>(l) << 8 | static_cast<size_t>(x);
            t[bit / 64] |= uint64_t{1} << (bit % 64);
          }
          c.reset();
        }
      }
    }
    return t;
  }();
  const size_t bit = (static_cast<size_t>(mode) << 16) | static_cast<size_t>(lead) << 8 | next;
  return (table[bit / 64] >> (bit % 64)) & 1;
}

std::string canonical(std::string_view s, Canonicaliser::Mode mode) {
  Canonicaliser c(mode);
  std::string out;
  auto emit = [&](int b, uint64_t, uint64_t) {
    if (b >= 0) out.push_back(static_cast<char>(b));
  };
  for (size_t i = 0; i < s.size(); ++i) c.push(static_cast<unsigned char>(s[i]), i, emit);
  c.flush(emit);
  return out;
}

namespace {

bool token_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         std::string_view("!#$&+.^_`|~-%'").find(c) != std::string_view::npos;
}

struct Part {
  size_t index;
  std::string bytes;
  std::vector<size_t> at;
};

// One line's continued parameters, by name (lower case).
void line_continuations(std::string_view text, size_t from, size_t to,
                        std::map<std::string, std::vector<Part>>& by_name) {
  for (size_t i = from; i < to; ++i) {
    if (text[i] != ';' && text[i] != ':') continue;
    size_t p = i + 1;
    while (p < to && (text[p] == ' ' || text[p] == '\t')) ++p;
    const size_t name_start = p;
    while (p < to && token_char(text[p]) && text[p] != '*') ++p;
    if (p == name_start || p >= to || text[p] != '*') continue;
    std::string name(text.substr(name_start, p - name_start));
    ++p;
    const size_t digits = p;
    size_t index = 0;
    while (p < to && text[p] >= '0' && text[p] <= '9' && p - digits < 6)
      index = index * 10 + (text[p++] - '0');
    if (p == digits) continue;
    if (p < to && text[p] == '*') ++p;
    if (p >= to || text[p] != '=') continue;
    ++p;
    Part part{index, {}, {}};
    if (p < to && text[p] == '"') {
      for (++p; p < to && text[p] != '"'; ++p) {
        if (text[p] == '\\' && p + 1 < to) ++p;
        part.bytes.push_back(text[p]);
        part.at.push_back(p);
      }
    } else {
      for (; p < to && text[p] != ';' && text[p] != '\r' && text[p] != ' ' && text[p] != '\t'; ++p) {
        part.bytes.push_back(text[p]);
        part.at.push_back(p);
      }
    }
    for (char& c : name) c = static_cast<char>(lower(static_cast<unsigned char>(c)));
    by_name[name].push_back(std::move(part));
    i = p - 1;
  }
}

}  // namespace

std::vector<JoinedParameter> parameter_continuations(std::string_view text) {
  std::vector<JoinedParameter> out;
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == std::string_view::npos) end = text.size();
    if (text.substr(line, end - line).find('*') != std::string_view::npos) {
      std::map<std::string, std::vector<Part>> by_name;
      line_continuations(text, line, end, by_name);
      for (auto& [name, parts] : by_name) {
        if (parts.size() < 2) continue;
        std::stable_sort(parts.begin(), parts.end(),
                         [](const Part& a, const Part& b) { return a.index < b.index; });
        JoinedParameter j;
        for (Part& p : parts) {
          j.value += p.bytes;
          j.at.insert(j.at.end(), p.at.begin(), p.at.end());
          OPENSSL_cleanse(p.bytes.data(), p.bytes.size());
        }
        out.push_back(std::move(j));
      }
    }
    line = end + 1;
  }
  return out;
}

}  // namespace zn::proxy
