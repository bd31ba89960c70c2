#include "userspace/ingress/ticket_carrier.h"

#include <vector>

#include "userspace/http/rewrite.h"

namespace zn::ingress {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Each found carrier's value goes to `found`; a second one is an error.
void take(std::optional<std::string>& found, std::string value, const char* what, std::string& error) {
  if (value.empty() && error.empty()) error = std::string("empty ") + what;
  if (found && error.empty()) error = std::string("more than one ") + what;
  found = std::move(value);
}

}  // namespace

std::string binding_cookie_name(uint16_t port) {
  return std::string(kBindingCookiePrefix) + std::to_string(port);
}

Admission take_admission(const http::RequestHead& head, uint16_t port) {
  Admission out;
  const std::string cookie_name = binding_cookie_name(port);
  std::optional<std::string> from_header, from_query, from_path;

  // The target: a path prefix, then the query's parameters, read as the
  // guest's server will (percent-decoded names, '+' as space).
  std::string_view target = head.target;
  const size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
  std::string new_path(path);
  if (path.starts_with(kTicketPathPrefix)) {
    std::string_view rest = path.substr(kTicketPathPrefix.size());
    const size_t slash = rest.find('/');
    take(from_path, std::string(rest.substr(0, slash)), "ticket", out.error);
    new_path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    // "/_zn/T/_zn/U/": no second ticket may be left for the guest to see.
    if (std::string_view(new_path).starts_with(kTicketPathPrefix) && out.error.empty())
      out.error = "more than one ticket";
  }
  std::string new_query;
  if (q != std::string_view::npos) {
    for (std::string_view param : split(query, '&')) {
      const size_t eq = param.find('=');
      if (http::form_decode(param.substr(0, eq)) == kTicketParameter) {
        take(from_query, eq == std::string_view::npos ? "" : http::form_decode(param.substr(eq + 1)),
             "ticket", out.error);
        continue;
      }
      if (!new_query.empty()) new_query += '&';
      new_query += param;
    }
  }

  std::string headers;
  for (const http::Header& h : head.headers) {
    if (http::iequals(h.name, kTicketHeader)) {
      take(from_header, h.value, "ticket", out.error);
      continue;
    }
    if (http::iequals(h.name, "Cookie")) {
      std::string kept;
      for (std::string_view pair : split(h.value, ';')) {
        pair = trim(pair);
        const size_t eq = pair.find('=');
        if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == cookie_name) {
          take(out.binding, std::string(trim(pair.substr(eq + 1))), "binding cookie", out.error);
          continue;
        }
        if (pair.empty()) continue;
        if (!kept.empty()) kept += "; ";
        kept += pair;
      }
      if (!kept.empty()) headers += h.name + ": " + kept + "\r\n";
      continue;
    }
    headers += h.name + ": " + h.value + "\r\n";
  }

  const int carriers =
      int(from_header.has_value()) + int(from_query.has_value()) + int(from_path.has_value());
  if (carriers > 1 && out.error.empty()) out.error = "a ticket in more than one place";
  out.ticket = from_header ? from_header : from_query ? from_query : from_path;

  std::string line = head.method + " " + new_path;
  if (q != std::string_view::npos && !new_query.empty()) line += "?" + new_query;
  line += " HTTP/1." + std::to_string(head.version_minor) + "\r\n";
  out.forwarded_head = line + headers + "\r\n";
  return out;
}

}  // namespace zn::ingress
