// Reads back what the NATS audit sink (nats_sink.h) stored for one host, for
// `znctl audit verify --nats`: every message payload on
// "<subject_prefix>.<host>.>" (records and seals: one JSON object line each)
// in stream order, from the first message the stream holds to the last one
// it held when the read started. Messages stored during the read are left
// for the next one.
//
// An ephemeral ordered consumer (memory only, no acks, removed by the server
// when the reader goes away): reading never changes the stream.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace zn::broker::audit_sinks {

struct NatsReadOptions {
  std::string url;  // nats://host:port or tls://host:port
  std::string stream = "ZN_AUDIT";
  std::string subject_prefix = "zn.audit";
  std::string host;        // the host's name as the sink had it (SinkContext::host), not yet a token
  std::string ca_file;     // optional
  std::string creds_file;  // optional
  std::chrono::milliseconds timeout{30000};  // the whole read, connecting included
};

// The payloads in stream order; throws NatsError (nats_connection.h) when the
// server cannot be reached, the stream does not exist, or the read does not
// finish within `timeout`.
std::vector<std::string> read_nats_audit(const NatsReadOptions& options);

}  // namespace zn::broker::audit_sinks
