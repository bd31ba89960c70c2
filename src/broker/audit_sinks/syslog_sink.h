// The syslog sink (issue 16): each line of a batch, then its seal, as one
// RFC 5424 message, framed by octet counting (RFC 6587 "LEN SP MSG") over
// TCP, or over TLS (RFC 5425) with the server's certificate verified.
//
// Syslog has no acknowledgement. What this sink can tell is that the
// receiver's TCP stack acknowledged every byte (SIOCOUTQ back to zero)
// before deliver() returns: a receiver that dies after that loses the
// batch, one that dies before makes deliver() throw and the exporter
// sends the batch again (at least once).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "broker/audit_export/sink.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX, kept out of this header

namespace zn::broker::audit_sinks {

struct SyslogSinkOptions {
  std::string host;  // a name or an IP literal (IPv6 without brackets)
  uint16_t port = 0;
  bool tls = false;
  std::string ca_file;      // TLS: the CAs to trust; empty = the system's store
  std::string server_name;  // TLS: the name (or IP) the certificate must carry; empty = host
  int facility = 16;        // local0
  std::string app_name = "zerod";
  std::chrono::milliseconds timeout{5000};  // connect + handshake; each wait for write progress or ack
};

// The RFC 5424 message for one line (no framing): "<PRI>1 TS HOST APP PID MSGID - MSG".
// `timestamp` is RFC 3339 (or empty for the nil value); fields outside
// RFC 5424's character set and lengths are made to fit.
std::string syslog_message(int facility, int severity, const std::string& timestamp, const std::string& host,
                           const std::string& app_name, const std::string& msgid, const std::string& msg);

class SyslogSink : public audit_export::AuditSink {
 public:
  SyslogSink(SyslogSinkOptions options, audit_export::SinkContext context);
  ~SyslogSink() override;

  // Connects (again) when there is no live connection; keeps it for the
  // next batch. Any failure closes it and throws SinkError.
  void deliver(const audit_export::ExportBatch& batch) override;
  void close() override;

 private:
  class Connection;
  std::string frame(const audit_export::ExportBatch& batch) const;
  std::string where() const;
  // The TLS settings every connection shares, made on first use; null for plain TCP.
  ssl_ctx_st* tls_context();

  SyslogSinkOptions options_;
  audit_export::SinkContext context_;
  struct TlsContext;
  std::unique_ptr<TlsContext> tls_;  // made once, for every connection
  std::unique_ptr<Connection> connection_;
};

}  // namespace zn::broker::audit_sinks
