// One connection to a NATS server with its JetStream context, shared by the
// NATS audit sink (nats_sink.h) and its reader (nats_reader.h): the URL, TLS
// and credentials settings, the timeouts, and libnats' errors as text.
//
// libnats reconnects by itself by default; here it never does: a connection
// that drops is closed, the operation in flight fails at once, and the owner
// decides when to connect again (the sink: on the exporter's next retry).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include <nats/nats.h>

namespace zn::broker::audit_sinks {

// Where and how to connect.
struct NatsEndpoint {
  std::string url;                          // nats://host:port or tls://host:port
  std::string ca_file;                      // PEM CAs to verify the server with; empty: the system's
  std::string creds_file;                   // a NATS .creds file (JWT and NKey seed); empty: none
  std::chrono::milliseconds timeout{5000};  // connect, and each JetStream request
};

// What failed, with libnats' reason (never a credential: URLs in config carry
// none, see check_nats_sink, and libnats' texts name no secret).
struct NatsError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "<what>: <libnats' status text>[: <detail>][ (JetStream error N)]".
std::string nats_failure(const std::string& what, natsStatus status,
                         jsErrCode js_error = static_cast<jsErrCode>(0));

// The URL (list) as errors show it: any user, password or token replaced by
// "***" ("nats://***@host:4222").
std::string nats_shown_url(const std::string& url);

class NatsConnection {
 public:
  // Connects and opens a JetStream context; throws NatsError.
  explicit NatsConnection(const NatsEndpoint& endpoint);
  ~NatsConnection();
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;

  natsConnection* connection() const { return conn_; }
  jsCtx* jetstream() const { return js_; }
  // False once the server went away (the connection is then closed for good).
  bool usable() const;

 private:
  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
};

}  // namespace zn::broker::audit_sinks
