#include "broker/audit_sinks/sink_factory.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <map>
#include <stdexcept>

#include "broker/audit_sinks/nats_sink.h"
#include "userspace/net/address.h"

namespace zn::broker::audit_sinks {

using nlohmann::json;

namespace {

constexpr long long kMinTimeoutMs = 100;
constexpr long long kMaxTimeoutMs = 600000;
constexpr size_t kMaxTokenBytes = 4096;

[[noreturn]] void bad(const std::string& field_path, const std::string& what) {
  throw std::invalid_argument(field_path + ": " + what);
}

std::string field_path(const std::string& path, std::string_view name) {
  return path + "." + std::string(name);
}

void reject_unknown_fields(const json& config, const std::string& path,
                           std::initializer_list<std::string_view> own) {
  for (const auto& [name, value] : config.items()) {
    const bool known =
        std::find(own.begin(), own.end(), name) != own.end() ||
        std::find(kExporterSinkFields.begin(), kExporterSinkFields.end(), name) != kExporterSinkFields.end();
    if (!known) bad(field_path(path, name), "unknown field");
  }
}

std::optional<std::string> optional_string(const json& config, const std::string& path,
                                           std::string_view name) {
  const auto it = config.find(name);
  if (it == config.end()) return std::nullopt;
  if (!it->is_string() || it->get_ref<const std::string&>().empty())
    bad(field_path(path, name), "must be a non-empty string");
  return it->get<std::string>();
}

std::string required_string(const json& config, const std::string& path, std::string_view name) {
  auto value = optional_string(config, path, name);
  if (!value) bad(field_path(path, name), "required");
  return *value;
}

std::chrono::milliseconds timeout_field(const json& config, const std::string& path,
                                        std::chrono::milliseconds fallback) {
  const auto it = config.find("timeout_ms");
  if (it == config.end()) return fallback;
  if (!it->is_number_integer() || it->get<long long>() < kMinTimeoutMs ||
      it->get<long long>() > kMaxTimeoutMs)
    bad(field_path(path, "timeout_ms"),
        "must be an integer from " + std::to_string(kMinTimeoutMs) + " to " + std::to_string(kMaxTimeoutMs));
  return std::chrono::milliseconds(it->get<long long>());
}

bool is_ip_literal(const std::string& s) { return net::IpAddress::parse(s).has_value(); }

// A DNS name as a certificate or resolver takes it: labels of letters,
// digits, '-' and '_', at most 253 characters.
bool is_host_name(const std::string& s) {
  if (s.empty() || s.size() > 253 || s.front() == '.' || s.front() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '.' || c == '_'; });
}

// A file of PEM CA certificates, loaded as the TLS code will load it.
std::string ca_file_field(const json& config, const std::string& path) {
  std::string file = required_string(config, path, "ca_file");
  const std::string where = field_path(path, "ca_file");
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) bad(where, file + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) bad(where, file + ": not a regular file");
  X509_STORE* store = X509_STORE_new();
  if (!store) throw std::bad_alloc();
  const bool loaded = X509_STORE_load_file(store, file.c_str()) == 1;
  const bool any = loaded && sk_X509_OBJECT_num(X509_STORE_get0_objects(store)) > 0;
  X509_STORE_free(store);
  ERR_clear_error();  // what a failed load left is said here, not by the next TLS call on this thread
  if (!any) bad(where, file + ": no PEM certificate in it");
  return file;
}

// The token: the file's one line, owned by root or by us and readable by
// nobody else. No message says anything of its content. O_NONBLOCK: a FIFO
// put in its place fails the regular-file check instead of hanging open().
Secret token_from_file(const json& config, const std::string& path) {
  const std::string file = required_string(config, path, "token_file");
  const std::string where = field_path(path, "token_file");
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) bad(where, file + ": " + std::strerror(errno));
  std::string content(kMaxTokenBytes + 1, '\0');
  size_t got = 0;
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    problem = "owned by uid " + std::to_string(st.st_uid) + ", not by root or by this process's uid";
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    problem = std::string("mode ") + mode + " lets group or others at it; it must be 0600 or 0400";
  } else {
    for (;;) {
      const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) problem = std::string("read: ") + std::strerror(errno);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
      if (got == content.size()) break;
    }
  }
  ::close(fd);
  const auto wipe = [&] { sodium_memzero(content.data(), content.size()); };
  if (problem.empty() && got > kMaxTokenBytes)
    problem = "longer than " + std::to_string(kMaxTokenBytes) + " bytes";
  size_t end = got;
  while (end > 0 && (content[end - 1] == '\n' || content[end - 1] == '\r')) --end;
  const std::string_view token(content.data(), end);
  // Printable ASCII only: a token goes into a header line as it is.
  if (problem.empty() && token.empty()) problem = "empty";
  if (problem.empty() &&
      !std::all_of(token.begin(), token.end(), [](unsigned char c) { return c > 32 && c < 127; }))
    problem = "the token must be one line of printable characters without spaces";
  if (!problem.empty()) {
    wipe();
    bad(where, file + ": " + problem);
  }
  Secret secret(token);
  wipe();
  return secret;
}

void reject_unless(const json& config, const std::string& path, std::string_view name, bool allowed,
                   const std::string& why) {
  if (!allowed && config.contains(name)) bad(field_path(path, name), why);
}

int facility_field(const json& config, const std::string& path) {
  static const std::map<std::string, int, std::less<>> kNames = {
      {"kern", 0},    {"user", 1},    {"mail", 2},    {"daemon", 3},  {"auth", 4},      {"syslog", 5},
      {"lpr", 6},     {"news", 7},    {"uucp", 8},    {"cron", 9},    {"authpriv", 10}, {"ftp", 11},
      {"ntp", 12},    {"audit", 13},  {"alert", 14},  {"clock", 15},  {"local0", 16},   {"local1", 17},
      {"local2", 18}, {"local3", 19}, {"local4", 20}, {"local5", 21}, {"local6", 22},   {"local7", 23}};
  const auto it = config.find("facility");
  if (it == config.end()) return 16;
  if (it->is_number_integer() && it->get<long long>() >= 0 && it->get<long long>() <= 23)
    return static_cast<int>(it->get<long long>());
  if (it->is_string())
    if (const auto name = kNames.find(it->get_ref<const std::string&>()); name != kNames.end())
      return name->second;
  bad(field_path(path, "facility"),
      "must be a facility name (local0 .. local7, daemon, auth, ...) or 0 .. 23");
}

void parse_address(const std::string& address, const std::string& where, SyslogSinkOptions& out) {
  std::string host, port;
  if (address.starts_with('[')) {
    const size_t close = address.find(']');
    if (close == std::string::npos || address.compare(close, 2, "]:") != 0)
      bad(where, "must be HOST:PORT, with an IPv6 address in brackets ([::1]:6514)");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
    const auto ip = net::IpAddress::parse(host);
    if (!ip || ip->family != AF_INET6) bad(where, "\"" + host + "\" is not an IPv6 address");
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) bad(where, "must be HOST:PORT");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string::npos)
      bad(where, "an IPv6 address goes in brackets: [" + host + "]:" + port);
    if (!is_ip_literal(host) && !is_host_name(host))
      bad(where, "\"" + host + "\" is not a host name or address");
  }
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) ||
      std::stoi(port) < 1 || std::stoi(port) > 65535)
    bad(where, "the port must be 1 .. 65535");
  out.host = host;
  out.port = static_cast<uint16_t>(std::stoi(port));
}

using CheckFn = void (*)(const json&, const std::string&);
using MakeFn = std::unique_ptr<audit_export::AuditSink> (*)(const json&, const std::string&,
                                                            const audit_export::SinkContext&);

template <class Sink, auto Options>
std::unique_ptr<audit_export::AuditSink> make(const json& config, const std::string& path,
                                              const audit_export::SinkContext& context) {
  return std::make_unique<Sink>(Options(config, path), context);
}

template <auto Options>
void check(const json& config, const std::string& path) {
  (void)Options(config, path);
}

struct SinkType {
  std::string_view name;
  CheckFn check;
  MakeFn make;
};

const SinkType kSinkTypes[] = {
    {"syslog", check<syslog_sink_options>, make<SyslogSink, syslog_sink_options>},
    {"http", check<http_sink_options>, make<HttpSink, http_sink_options>},
    {"nats", check_nats_sink, make_nats_sink},
};

const SinkType& sink_type(const json& config, const std::string& path) {
  if (!config.is_object()) bad(path, "must be an object");
  const auto it = config.find("type");
  if (it == config.end()) bad(field_path(path, "type"), "required");
  if (!it->is_string()) bad(field_path(path, "type"), "must be a string");
  const auto& name = it->get_ref<const std::string&>();
  for (const auto& type : kSinkTypes)
    if (type.name == name) return type;
  std::string known;
  for (const auto& type : kSinkTypes) known += (known.empty() ? "" : ", ") + std::string(type.name);
  bad(field_path(path, "type"), "unknown network sink type \"" + name + "\" (known: " + known + ")");
}

}  // namespace

SyslogSinkOptions syslog_sink_options(const json& config, const std::string& path) {
  reject_unknown_fields(
      config, path, {"address", "transport", "ca_file", "server_name", "facility", "app_name", "timeout_ms"});
  SyslogSinkOptions out;
  parse_address(required_string(config, path, "address"), field_path(path, "address"), out);
  const std::string transport = required_string(config, path, "transport");
  if (transport != "tcp" && transport != "tls")
    bad(field_path(path, "transport"), "must be \"tcp\" or \"tls\"");
  out.tls = transport == "tls";
  const std::string only_tls = "only with \"transport\": \"tls\"";
  reject_unless(config, path, "ca_file", out.tls, only_tls);
  reject_unless(config, path, "server_name", out.tls, only_tls);
  if (config.contains("ca_file")) out.ca_file = ca_file_field(config, path);
  if (auto name = optional_string(config, path, "server_name")) {
    if (!is_ip_literal(*name) && !is_host_name(*name))
      bad(field_path(path, "server_name"), "\"" + *name + "\" is not a host name or address");
    out.server_name = *name;
  }
  out.facility = facility_field(config, path);
  if (auto app = optional_string(config, path, "app_name")) {
    if (app->size() > 48 ||
        !std::all_of(app->begin(), app->end(), [](unsigned char c) { return c > 32 && c < 127; }))
      bad(field_path(path, "app_name"),
          "must be 1 .. 48 printable ASCII characters without spaces (RFC 5424)");
    out.app_name = *app;
  }
  out.timeout = timeout_field(config, path, out.timeout);
  return out;
}

HttpSinkOptions http_sink_options(const json& config, const std::string& path) {
  reject_unknown_fields(config, path, {"url", "shape", "token_file", "ca_file", "timeout_ms"});
  HttpSinkOptions out;
  out.url = required_string(config, path, "url");
  const std::string url_path = field_path(path, "url");
  // http:// is allowed for a collector on this host or a trusted segment
  // (a local Vector or Fluent Bit forwarding on over TLS); anything that
  // crosses a network should be https://.
  CURLU* url = curl_url();
  if (!url) throw std::bad_alloc();
  char* scheme = nullptr;
  char* host = nullptr;
  char* user = nullptr;
  const bool parsed = curl_url_set(url, CURLUPART_URL, out.url.c_str(), 0) == CURLUE_OK;
  if (parsed) {
    curl_url_get(url, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(url, CURLUPART_HOST, &host, 0);
    curl_url_get(url, CURLUPART_USER, &user, 0);
  }
  const std::string scheme_text = scheme ? scheme : "";
  const bool has_host = host && host[0];
  const bool has_user = user != nullptr;
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_url_cleanup(url);
  if (!(out.url.starts_with("http://") || out.url.starts_with("https://")) ||
      (parsed && scheme_text != "http" && scheme_text != "https"))
    bad(url_path, "must be http:// or https://");
  if (!parsed) bad(url_path, "is not a valid URL");
  if (!has_host) bad(url_path, "has no host");
  if (has_user) bad(url_path, "must not carry credentials: the token goes in token_file");
  const bool https = scheme_text == "https";

  const std::string shape = required_string(config, path, "shape");
  if (shape == "json_lines")
    out.shape = HttpShape::kJsonLines;
  else if (shape == "splunk_hec")
    out.shape = HttpShape::kSplunkHec;
  else if (shape == "datadog")
    out.shape = HttpShape::kDatadog;
  else
    bad(field_path(path, "shape"), "must be \"json_lines\", \"splunk_hec\" or \"datadog\"");

  if (config.contains("token_file"))
    out.token = token_from_file(config, path);
  else if (out.shape != HttpShape::kJsonLines)
    bad(field_path(path, "token_file"), "required for shape \"" + shape + "\"");
  reject_unless(config, path, "ca_file", https, "only for an https:// url");
  if (config.contains("ca_file")) out.ca_file = ca_file_field(config, path);
  out.timeout = timeout_field(config, path, out.timeout);
  return out;
}

bool is_network_sink_type(const std::string& type) {
  return std::any_of(std::begin(kSinkTypes), std::end(kSinkTypes),
                     [&](const SinkType& known) { return known.name == type; });
}

void check_network_sink(const json& config, const std::string& path) {
  sink_type(config, path).check(config, path);
}

std::unique_ptr<audit_export::AuditSink> make_network_sink(const json& config, const std::string& path,
                                                           const audit_export::SinkContext& context) {
  return sink_type(config, path).make(config, path, context);
}

}  // namespace zn::broker::audit_sinks
