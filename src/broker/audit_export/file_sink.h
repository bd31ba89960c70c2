// The rotating JSONL file sink (issue 16): each batch (its lines, then its
// seal) is appended with one write and fsync'ed before deliver() returns, so
// what the exporter counts as delivered is on disk. The file is rotated at a
// batch boundary (every file ends with a seal and verifies on its own
// after the one before it) once it reaches max_bytes or max_age: renamed to
// <path>.<UTC time>.<n> and, with compress, gzipped (<...>.gz); at most
// `keep` rotated files are kept, the oldest removed first.
//
// A crash in the middle of a write leaves a partial last line: it is cut off
// when the file is opened again, and the exporter delivers that batch again.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit_export/sink.h"

namespace zn::broker::audit_export {

struct FileSinkOptions {
  std::string path;                     // absolute
  uint64_t max_bytes = 64ull << 20;     // rotate at this size
  std::chrono::seconds max_age{86400};  // or when the file is this old
  size_t keep = 10;                     // rotated files kept
  bool compress = true;                 // gzip rotated files
};

// Parses a "file" sink's own fields (type_fields()). Throws
// std::invalid_argument naming the field ("$.audit_sinks[0].path: ...").
FileSinkOptions parse_file_sink(const nlohmann::json& config, const std::string& path);

class FileSink : public AuditSink {
 public:
  explicit FileSink(FileSinkOptions options);
  ~FileSink() override;
  void deliver(const ExportBatch& batch) override;
  void close() override;

 private:
  void open_file();
  void rotate();
  void prune_rotated();

  FileSinkOptions options_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::chrono::system_clock::time_point opened_;
};

}  // namespace zn::broker::audit_export
