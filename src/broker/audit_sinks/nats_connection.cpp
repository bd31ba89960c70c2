#include "broker/audit_sinks/nats_connection.h"

#include <memory>

namespace zn::broker::audit_sinks {
namespace {

struct OptionsDeleter {
  void operator()(natsOptions* o) const { natsOptions_Destroy(o); }
};
using Options = std::unique_ptr<natsOptions, OptionsDeleter>;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

void check(natsStatus status, const std::string& what) {
  if (status != NATS_OK) throw NatsError(nats_failure(what, status));
}

}  // namespace

std::string nats_shown_url(const std::string& url) {
  std::string out;
  for (size_t start = 0;;) {
    const size_t comma = url.find(',', start);
    std::string one = url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t scheme = one.find("://");
    const size_t at = one.rfind('@');
    if (at != std::string::npos)
      one.replace(scheme == std::string::npos ? 0 : scheme + 3,
                  at - (scheme == std::string::npos ? 0 : scheme + 3), "***");
    out += one;
    if (comma == std::string::npos) return out;
    out += ',';
    start = comma + 1;
  }
}

std::string nats_failure(const std::string& what, natsStatus status, jsErrCode js_error) {
  std::string text = what + ": " + natsStatus_GetText(status);
  // libnats keeps a per-thread detail of the last failure (a TLS verify
  // error, a server's -ERR): the reason an operator needs.
  natsStatus last = NATS_OK;
  const char* raw_detail = nats_GetLastError(&last);
  std::string detail = raw_detail != nullptr ? raw_detail : "";
  // It starts with libnats' own source location: "(conn.c:2088): ".
  if (!detail.empty() && detail.front() == '(') {
    const size_t end = detail.find("): ");
    if (end != std::string::npos) detail.erase(0, end + 3);
  }
  if (last == status && !detail.empty() && detail != natsStatus_GetText(status)) text += ": " + detail;
  if (js_error != 0) text += " (JetStream error " + std::to_string(static_cast<int>(js_error)) + ")";
  return text;
}

NatsConnection::NatsConnection(const NatsEndpoint& endpoint) {
  natsOptions* raw = nullptr;
  check(natsOptions_Create(&raw), "NATS options");
  Options opts(raw);
  const int64_t timeout_ms = endpoint.timeout.count();
  check(natsOptions_SetURL(opts.get(), endpoint.url.c_str()), "NATS url");
  check(natsOptions_SetTimeout(opts.get(), timeout_ms), "NATS connect timeout");
  check(natsOptions_SetName(opts.get(), "zeroness-audit"), "NATS client name");
  // Our own reconnects (see the header); a request waiting for its reply
  // fails when the connection drops rather than at its timeout.
  check(natsOptions_SetAllowReconnect(opts.get(), false), "NATS reconnect");
  check(natsOptions_SetFailRequestsOnDisconnect(opts.get(), true), "NATS requests on disconnect");
  // tls:// or a CA file: TLS is required, never dropped to plain text.
  if (starts_with(endpoint.url, "tls://") || !endpoint.ca_file.empty())
    check(natsOptions_SetSecure(opts.get(), true), "NATS TLS");
  if (!endpoint.ca_file.empty())
    check(natsOptions_LoadCATrustedCertificates(opts.get(), endpoint.ca_file.c_str()),
          "ca_file " + endpoint.ca_file);
  if (!endpoint.creds_file.empty())
    check(natsOptions_SetUserCredentialsFromFiles(opts.get(), endpoint.creds_file.c_str(), nullptr),
          "creds_file " + endpoint.creds_file);

  check(natsConnection_Connect(&conn_, opts.get()), "connect to " + nats_shown_url(endpoint.url));
  jsOptions js_opts;
  jsOptions_Init(&js_opts);
  js_opts.Wait = timeout_ms;
  const natsStatus s = natsConnection_JetStream(&js_, conn_, &js_opts);
  if (s != NATS_OK) {
    natsConnection_Destroy(conn_);
    conn_ = nullptr;
    throw NatsError(nats_failure("JetStream context", s));
  }
}

NatsConnection::~NatsConnection() {
  jsCtx_Destroy(js_);
  if (conn_ != nullptr) {
    natsConnection_Close(conn_);
    natsConnection_Destroy(conn_);
  }
}

bool NatsConnection::usable() const { return conn_ != nullptr && !natsConnection_IsClosed(conn_); }

}  // namespace zn::broker::audit_sinks
