// Where a sink is in the chain, kept on disk so a restart resumes in order
// (issue 16): the store is the spool, and this file says how much of it the
// sink has been given. {"range_start":R,"read_from":F,"dropped":[a,b]?}:
// the next seal covers R.., the next read starts at F (F > R only after a
// drop, whose range the next seal declares). Written whole (temporary file,
// fsync, rename, directory fsync) by the exporter's thread, never the data
// path's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "broker/audit_export/batch_seal.h"

namespace zn::broker::audit_export {

struct ExportCursor {
  uint64_t range_start = 1;
  uint64_t read_from = 1;
  std::optional<DroppedRange> dropped;
};

// The cursor at path; a missing file is a sink that starts now (at
// `start_at`: the chain head + 1, so a new sink does not replay history).
// Throws std::runtime_error naming the path if the file is unreadable or
// malformed (never silently restarts a sink: that would skip or replay).
ExportCursor load_export_cursor(const std::string& path, uint64_t start_at);

// Throws std::runtime_error naming the path.
void save_export_cursor(const std::string& path, const ExportCursor& cursor);

}  // namespace zn::broker::audit_export
