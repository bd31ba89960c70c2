// The audit trail: validates an event, redacts registered secrets, chains it
// (audit_chain.h), stores it durably (audit_store.h) and emits one JSON line.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/audit/chain.h"
#include "broker/audit/event.h"
#include "broker/audit/redact.h"
#include "broker/audit/store.h"

namespace zn::broker {

struct AuditLogOptions {
  using Clock = std::function<std::chrono::system_clock::time_point()>;
  using LineSink = std::function<void(const std::string& line)>;

  std::string db_path;  // SQLite file; created if missing, chain continued if present
  Clock clock;          // default: std::chrono::system_clock::now
  LineSink sink;        // default: the line plus '\n' to stdout, flushed
};

class AuditLog {
 public:
  // Throws std::runtime_error if the store cannot be opened.
  explicit AuditLog(AuditLogOptions opts);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Thread-safe. Validates (std::invalid_argument, nothing written), redacts,
  // assigns seq and ts, chains, commits, then hands the JSON line to the sink
  // (in seq order; a throwing sink is ignored: the record is already
  // durable). Concurrent appends are committed together in one transaction
  // (group commit); each returns once its own record is durable. Throws
  // std::runtime_error if the store fails (nothing of that transaction
  // stored, nothing emitted). Returns the stored record.
  AuditRecord append(AuditEvent ev);

  // Thread-safe. Returns false if not accepted (< 8 bytes or invalid UTF-8).
  // Applies to events appended afterwards; kept in memory only, never logged.
  bool add_secret(std::string value);

  // Thread-safe. Oldest first. std::invalid_argument on a bad query.
  std::vector<AuditRecord> query(const AuditQuery& q);

  // Thread-safe. Verifies the whole chain in this log's file.
  AuditVerifyResult verify();

  // Verifies a chain file opened read-only (for znctl; never creates or
  // writes the file). Throws std::runtime_error if it cannot be read as an
  // audit store; chain defects are reported in the result.
  static AuditVerifyResult verify_file(const std::string& path);

 private:
  static AuditVerifyResult verify_store(AuditStore& store);

  struct Pending;
  static constexpr size_t kMaxBatch = 256;
  std::mutex mu_;
  std::condition_variable committed_;
  std::vector<Pending*> queue_;  // waiting to be committed, oldest first
  bool writing_ = false;         // a caller is committing a batch (mu_ released)
  AuditLogOptions opts_;
  AuditRedactor redactor_;
  std::unique_ptr<AuditStore> store_;
};

}  // namespace zn::broker
