// Where the audit goes besides its own store (issue 16): a sink takes whole
// batches of records, already filtered and formatted for it, each batch
// ending in a signed seal (batch_seal.h). The exporter (exporter.h) owns the
// order, the retries and the spool; a sink only delivers.
//
// A sink runs on its exporter's own thread and may block (connect, write,
// wait for an acknowledgement): it is never on the data path, and a sink
// that is down never holds enforcement up.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "broker/audit/event.h"

namespace zn::broker::audit_export {

// One batch: the records a sink's filter let through, in seq order, each
// also as a line in the sink's format (one JSON object, no newline), and the
// seal over the range of the chain the batch covers, as a JSON object line
// ({"zn":"audit-seal",...}).
struct ExportBatch {
  std::vector<AuditRecord> records;
  std::vector<std::string> lines;  // lines[i] is records[i] formatted
  std::string seal_line;
  uint64_t first_seq = 0;  // the range of the chain covered (filtered-out records included)
  uint64_t last_seq = 0;
};

// A delivery that failed: the exporter retries the same batch later (with
// exponential backoff, or after `retry_after` when the receiver said so).
struct SinkError : std::runtime_error {
  explicit SinkError(const std::string& what,
                     std::optional<std::chrono::milliseconds> retry_after = std::nullopt)
      : std::runtime_error(what), retry_after(retry_after) {}
  std::optional<std::chrono::milliseconds> retry_after;
};

class AuditSink {
 public:
  virtual ~AuditSink() = default;
  // Delivers the whole batch (records, then the seal), or throws SinkError.
  // At least once: a batch may be delivered again after a failure or a
  // restart (receivers dedupe by seq; NATS by message id).
  virtual void deliver(const ExportBatch& batch) = 0;
  // Drops connections (the exporter is stopping, or will retry from scratch).
  virtual void close() {}
};

// What every sink knows about the host it exports from.
struct SinkContext {
  std::string host;       // this host's name in subjects, syslog HOSTNAME, HEC host
  std::string state_dir;  // for a sink's own files (never secrets)
};

// The audit category of an event name: "egress:allow" -> "egress".
std::string event_category(const std::string& event);

}  // namespace zn::broker::audit_export
