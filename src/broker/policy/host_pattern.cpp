#include "broker/policy/host_pattern.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace zn::broker {
namespace {

constexpr size_t kMaxName = 253, kMaxLabel = 63;

// Second-level labels that, under a two-letter country code, form a public
// suffix (co.uk, com.au, ...): a wildcard directly under one is over-broad.
constexpr std::array<std::string_view, 12> kPublicSecondLevels = {"co", "com", "net", "org", "gov", "edu",
                                                                  "ac", "or",  "ne",  "go",  "gob", "nic"};

bool fail(std::string* why, const char* reason) {
  if (why) *why = reason;
  return false;
}

// ASCII classes, not <cctype>'s: a DNS name's rules do not change with the locale.
bool lower_or_digit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool valid_label(std::string_view label, std::string* why) {
  if (label.empty()) return fail(why, "empty label");
  if (label.size() > kMaxLabel) return fail(why, "label longer than 63 characters");
  if (label.front() == '-' || label.back() == '-') return fail(why, "label starts or ends with '-'");
  for (char c : label)
    if (!(lower_or_digit(c) || c == '-' || c == '_')) return fail(why, "character outside [a-z0-9-_]");
  return true;
}

size_t label_count(std::string_view name) { return std::count(name.begin(), name.end(), '.') + 1; }

}  // namespace

bool is_ip_literal(std::string_view text) {
  // Both forms are written with these characters only: most names (and any
  // text with a NUL, which would cut the C string short) are answered
  // without a copy or a call.
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.' ||
               c == ':';
      }))
    return false;
  char s[INET6_ADDRSTRLEN];  // the longest text form and its NUL
  if (text.size() >= sizeof s) return false;
  text.copy(s, text.size());
  s[text.size()] = '\0';
  unsigned char buf[16];
  return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

std::optional<std::string> normalize_dns_name(std::string_view name, std::string* why) {
  std::string out(name);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  if (!out.empty() && out.back() == '.') out.pop_back();
  if (out.empty()) return fail(why, "empty name"), std::nullopt;
  if (out.size() > kMaxName) return fail(why, "name longer than 253 characters"), std::nullopt;
  size_t start = 0;
  while (true) {
    size_t dot = out.find('.', start);
    std::string_view label(out.data() + start, (dot == std::string::npos ? out.size() : dot) - start);
    if (!valid_label(label, why)) return std::nullopt;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

std::optional<HostPattern> parse_host_pattern(std::string_view text, std::string* why) {
  if (text.empty()) return fail(why, "empty host"), std::nullopt;
  // Addresses: a literal or a CIDR ("198.18.0.0/24").
  std::string_view addr = text.substr(0, text.find('/'));
  if (is_ip_literal(addr)) {
    if (addr.size() != text.size()) {
      std::string bits(text.substr(addr.size() + 1));
      const int max = addr.find(':') == std::string_view::npos ? 32 : 128;
      if (bits.empty() || bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit) ||
          std::stoi(bits) > max)
        return fail(why, "bad prefix length"), std::nullopt;
    }
    return HostPattern{HostPattern::Kind::kAddress, std::string(text)};
  }
  if (text.rfind("*.", 0) == 0) {
    auto suffix = normalize_dns_name(text.substr(2), why);
    if (!suffix) return std::nullopt;
    if (suffix->find('*') != std::string::npos)
      return fail(why, "only one leading '*.' allowed"), std::nullopt;
    if (label_count(*suffix) < 2)
      return fail(why, "wildcard over a top-level domain is too broad"), std::nullopt;
    const std::string_view first(suffix->data(), suffix->find('.'));
    const std::string_view rest = std::string_view(*suffix).substr(first.size() + 1);
    if (label_count(*suffix) == 2 && rest.size() == 2 &&
        std::find(kPublicSecondLevels.begin(), kPublicSecondLevels.end(), first) != kPublicSecondLevels.end())
      return fail(why, "wildcard over a public suffix is too broad"), std::nullopt;
    return HostPattern{HostPattern::Kind::kWildcard, std::move(*suffix)};
  }
  if (text.find('*') != std::string_view::npos)
    return fail(why, "'*' is only allowed as a whole leading label ('*.example.com')"), std::nullopt;
  auto name = normalize_dns_name(text, why);
  if (!name) return std::nullopt;
  return HostPattern{HostPattern::Kind::kExact, std::move(*name)};
}

}  // namespace zn::broker
