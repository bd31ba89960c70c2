// The NATS JetStream audit sink (issue 16): each record of a batch is one
// message on "<subject_prefix>.<host>.<category>" (category: the event's
// prefix, "egress" for "egress:allow"), then the batch's seal on
// "<subject_prefix>.<host>.seal", published one at a time, each waiting for
// the stream's acknowledgement, so the stream holds a host's records in seq
// order. Every message carries a JetStream message id ("<host>-<seq>", the
// seal's "<host>-seal-<first_seq>-<last_seq>"): a batch delivered again after
// a retry or a restart is stored once, within the stream's duplicates window.
//
// The stream is created on first connect when missing: subjects
// "<subject_prefix>.>", file storage, a one-hour duplicates window. A stream
// that already exists is the operator's and is used as it is.
//
// Config (audit_sinks[i]):
//   {"type": "nats",
//    "url": "nats://host:4222" | "tls://host:4222",   required, no credentials in it
//    "stream": "ZN_AUDIT",                           default
//    "subject_prefix": "zn.audit",                   default
//    "creds_file": "/etc/zeroness/audit.creds",       optional, absolute
//    "ca_file": "/etc/zeroness/nats-ca.pem",          optional, absolute (implies TLS)
//    "timeout_ms": 5000}                              default; connect, and each acknowledgement
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit_export/sink.h"

namespace zn::broker::audit_sinks {

struct NatsSinkConfig {
  std::string url;
  std::string stream = "ZN_AUDIT";
  std::string subject_prefix = "zn.audit";
  std::string creds_file;  // empty: none
  std::string ca_file;     // empty: the system's CAs (when TLS)
  std::chrono::milliseconds timeout{5000};
};

// How long the stream this sink creates remembers message ids: a batch
// delivered again later than this after its first delivery is stored twice
// (readers then see a seq twice, with identical lines).
inline constexpr std::chrono::hours kNatsDuplicateWindow{1};

// Parses and validates the sink's object; throws std::invalid_argument
// naming the field ("$.audit_sinks[1].subject_prefix: ...") on a bad or
// unknown one. Never connects.
NatsSinkConfig parse_nats_sink_config(const nlohmann::json& config, const std::string& path);
void check_nats_sink(const nlohmann::json& config, const std::string& path);

// A sink for `context.host` (which must not be empty); connects on the first
// deliver().
std::unique_ptr<audit_export::AuditSink> make_nats_sink(const nlohmann::json& config, const std::string& path,
                                                        const audit_export::SinkContext& context);

// A host name (or category) as one subject token, deterministically and
// without collisions: letters, digits and '-' stay, '.' becomes '_', and
// every other byte ('_' and '%' included) becomes %XX (upper-case hex); the
// empty name is "%". "web-1.example.com" -> "web-1_example_com",
// "a_b" -> "a%5Fb", "db 2" -> "db%202".
std::string nats_subject_token(const std::string& name);

// "<subject_prefix>.<host token>" under which one host's messages go.
std::string nats_host_subject(const std::string& subject_prefix, const std::string& host);

}  // namespace zn::broker::audit_sinks
