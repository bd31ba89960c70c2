// zerod's audit export (issue 16): the sinks of the config's "audit_sinks",
// each with its exporter thread, sealed with zerod's audit key (an Ed25519
// seed beside the host key, 0600, made on the first start, in guarded pages
// like the other keys). Records dropped for a sink are audited
// (audit:dropped) and counted in the metrics.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/audit_export/batch_seal.h"
#include "broker/audit_export/exporter.h"

namespace zn::broker {

struct AuditExportConfig {
  std::string host;                   // this host's name in seals, subjects, syslog, OCSF ("" = gethostname)
  std::vector<nlohmann::json> sinks;  // audit_sinks[], checked by check_audit_sinks
  std::string signing_key;            // the seed file
  std::string state_dir;              // cursors under <state_dir>/audit-export/
  std::string db_path;
};

// Checks "audit_sinks" without connecting anywhere (config parsing and
// `zerod --check-config`): every field of every sink, unique names. Throws
// PolicyError with the field's JSON path.
void check_audit_sinks(const nlohmann::json& sinks);

class AuditExportService {
 public:
  // Loads or makes the audit key and starts one exporter per sink. Throws
  // std::runtime_error (a cursor or the key unreadable).
  AuditExportService(AuditExportConfig config, AuditLog& audit);
  ~AuditExportService();

  // Records were committed (the audit log's line sink calls this). Never blocks.
  void notify();
  // The public half of the audit key and its id, for receivers.
  nlohmann::json public_key() const;
  // The audit key itself (retention signs its checkpoints with it).
  std::shared_ptr<const SigningKey> signing_key() const { return key_; }
  // Per-sink state, for `znctl audit sinks` and the metrics.
  nlohmann::json status() const;
  // Prometheus lines (zn_audit_export_*{sink=...}).
  std::string metrics() const;

 private:
  AuditExportConfig config_;
  std::shared_ptr<const SigningKey> key_;
  std::shared_ptr<const audit_export::BatchSealer> sealer_;
  std::vector<std::unique_ptr<audit_export::AuditExporter>> exporters_;
};

}  // namespace zn::broker
