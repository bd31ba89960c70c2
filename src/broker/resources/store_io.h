// What the capability stores share below SQL: a persistent statement reset
// after each use, text bound without a copy, and a whole buffer written to a
// descriptor (the SQL helper's request and reply, a blob's bytes).
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace zn::broker {

// A persistent statement, reset and unbound on scope exit.
struct StatementReset {
  explicit StatementReset(sqlite3_stmt* s) : s(s) {}
  ~StatementReset() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
  StatementReset(const StatementReset&) = delete;
  StatementReset& operator=(const StatementReset&) = delete;
  sqlite3_stmt* s;
};

// Bound as static: the view must outlive the statement's step.
inline bool bind_text(sqlite3_stmt* s, int i, std::string_view v) {
  return sqlite3_bind_text64(s, i, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8) == SQLITE_OK;
}

// false with errno set when the descriptor refuses (a write of 0 counts as
// a refusal: the caller sees a short file rather than a loop).
inline bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace zn::broker
