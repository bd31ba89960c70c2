// Shared helpers for the audit tests: a private temp dir per test, raw SQLite
// access (to play the tamperer), a controllable clock and a capturing sink.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "broker/audit/log.h"
#include "support/temp_dir.h"

namespace zn::broker::test {

using zn::test::TempDir;

// Runs SQL on the file through a separate raw connection (the tamperer).
inline void raw_sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
  sqlite3_busy_timeout(h, 5000);
  char* err = nullptr;
  int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(h);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A clock the test moves by hand; starts at 2026-11-29T12:00:00.123Z.
struct FakeClock {
  static std::chrono::system_clock::time_point base() {
    using namespace std::chrono;
    return sys_days{year{2026} / November / 29} + hours{12} + milliseconds{123};
  }
  std::atomic<int64_t> offset_ms{0};
  std::chrono::system_clock::time_point now() const {
    return base() + std::chrono::milliseconds(offset_ms.load());
  }
  void advance(std::chrono::milliseconds d) { offset_ms += d.count(); }
};

struct CapturingSink {
  std::mutex mu;
  std::vector<std::string> lines;
  AuditLogOptions::LineSink fn() {
    return [this](const std::string& l) {
      std::lock_guard lk(mu);
      lines.push_back(l);
    };
  }
};

inline AuditEvent ev(std::string event, std::string sid, nlohmann::json detail = nlohmann::json::object()) {
  return AuditEvent{std::move(event), std::move(sid), std::move(detail)};
}

}  // namespace zn::broker::test
