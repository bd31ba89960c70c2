// A real audit log in a temp dir, an audit signing key and helpers to run an
// exporter over it and read back what a sink got, for the export tests.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker/audit_export/batch_seal.h"
#include "broker/audit_export/export_file_reader.h"
#include "broker/audit_export/export_verifier.h"
#include "broker/audit_export/exporter.h"
#include "support/audit_fixtures.h"

namespace zn::broker::audit_export::test {

using zn::broker::test::CapturingSink;
using zn::broker::test::ev;
using zn::broker::test::TempDir;

class ExportFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    AuditLogOptions o;
    o.db_path = dir.file("audit.db");
    o.sink = quiet.fn();
    log = std::make_unique<AuditLog>(std::move(o));
    key = SigningKey::generate();
    sealer = std::make_shared<BatchSealer>(key, "host-a");
  }

  // n records, alternating egress:allow (session s1) and dns:deny (session s2).
  void append(int n) {
    for (int i = 0; i < n; ++i) {
      const int k = counter++;
      if (k % 2 == 0)
        log->append(ev("egress:allow", "s1",
                       {{"host", "api.example"}, {"method", "GET"}, {"path", "/" + std::to_string(k)}}));
      else
        log->append(ev("dns:deny", "s2",
                       {{"name", "n" + std::to_string(k) + ".example"}, {"reason", "default deny"}}));
    }
  }

  AuditExporter::Options options(ExportSettings settings = {}) {
    if (settings.name.empty()) settings.name = "t";
    settings.backoff_initial = std::chrono::milliseconds(20);
    settings.backoff_max = std::chrono::milliseconds(100);
    AuditExporter::Options o;
    o.settings = settings;
    o.db_path = dir.file("audit.db");
    o.cursor_path = dir.file("export/" + settings.name + ".cursor");
    o.host = "host-a";
    o.poll = std::chrono::milliseconds(50);
    return o;
  }

  ExportVerifier::Options verify_options() {
    ExportVerifier::Options v;
    v.public_key = key->public_key();
    return v;
  }

  ExportVerifyResult verify_lines(const std::vector<std::string>& lines, ExportVerifier::Options v) {
    ExportVerifier verifier(std::move(v));
    for (const std::string& l : lines) verifier.feed(l);
    return verifier.finish();
  }
  ExportVerifyResult verify_lines(const std::vector<std::string>& lines) {
    return verify_lines(lines, verify_options());
  }

  std::vector<std::string> file_lines(const std::string& path) {
    std::vector<std::string> out;
    read_export_lines(path, [&](std::string_view l) {
      out.emplace_back(l);
      return true;
    });
    return out;
  }

  std::string head_anchor() {
    AuditStore store(dir.file("audit.db"), AuditStore::Mode::kReadOnly);
    const AuditStore::Head h = store.head();
    return std::to_string(h.seq) + ":" + h.hash;
  }

  TempDir dir;
  CapturingSink quiet;
  std::unique_ptr<AuditLog> log;
  std::shared_ptr<const SigningKey> key;
  std::shared_ptr<const BatchSealer> sealer;
  int counter = 0;
};

}  // namespace zn::broker::audit_export::test
