// Runs SQL on a database file behind the store's back (a test's setup or
// tampering), one definition for the resource tests: a unity batch compiles
// several test files as one translation unit.
#pragma once

#include <sqlite3.h>

#include <stdexcept>
#include <string>

namespace zn::test {

inline void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("open");
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error(msg);
}

}  // namespace zn::test
