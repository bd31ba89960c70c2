// One connection to a SQL capability's database (issue 13): one
// operator-named SQLite file, one statement per call, parameters and rows as
// JSON. SqlStore (sql_store.h) runs it in a process of its own per call.
//
// Read-only is enforced by SQLite, not by reading the statement's text. A ro
// store opens the file SQLITE_OPEN_READONLY with query_only on, and every
// statement passes an authorizer that allows only reads (SELECT, READ,
// RECURSIVE, functions not on a deny list, informational PRAGMAs from an
// allow list); sqlite3_stmt_readonly is checked again before it runs (each
// of the two refuses every write in the tests on its own). Both modes refuse
// ATTACH/DETACH (the attach limit is 0 too), load_extension, PRAGMAs off the
// allow list (writable_schema, journal_mode, max_page_count...), transaction
// control and savepoints (each call is its own transaction, so a guest cannot
// hold a lock across calls), and in rw mode TEMP objects (they would live
// outside the quota). VACUUM (INTO) meets the authorizer only when it runs,
// as its inner ATTACH; before that a ro store refuses it as a write and a rw
// store runs it inside the call's transaction, where SQLite refuses it. The
// connection runs with DEFENSIVE on, TRUSTED_SCHEMA and extension loading
// off, double-quoted string literals off. The schema is readable
// (sqlite_schema, table_info): the capability grants the database.
//
// A ro reader of a WAL-mode database still makes SQLite's -wal and -shm
// files next to it (the database file itself is not written); a dataset
// shipped in rollback-journal mode leaves its directory untouched.
//
// Eponymous virtual tables (json_each, pragma_table_info...) are built on
// first use through a nested parse the authorizer sees as a write to
// sqlite_master; the store builds the ones it allows at open, before the
// authorizer is installed, so a ro store serves exactly those and refuses
// the rest (dbstat and the like).
//
// Bounds per call: the statement's length and parameter count, a wall-time
// and VM-step budget (progress handler), rows and result bytes returned
// (kLimitExceeded, saying which), the size of one value (SQLITE_LIMIT_LENGTH),
// SQLite's other limits set low (columns, expression depth, compound SELECTs,
// LIKE/GLOB pattern length, function arguments, trigger depth), temporary
// tables and sort spills in memory (temp_store=MEMORY), so they fall under
// the heap bound rather than fill a disk. A rw store's file may not grow past
// its byte quota (PRAGMA max_page_count, set here, never by the guest):
// kQuotaExceeded, and the call's changes are rolled back — a rw call that
// writes runs in one transaction, all or nothing, including when a RETURNING
// result passes a limit.
//
// What these bounds cannot do is stop one function call: the progress
// handler runs between VM instructions, and a single printf, instr, replace
// or trim on values near the length limit runs for seconds to minutes inside
// one instruction. So a guest's statement never runs on a connection in
// zerod: SqlStore (sql_store.h) runs each call in its own process, which it
// kills at the deadline, and whose heap SQLite bounds (hard heap limit, plus
// an address-space limit behind it). This class is that process's engine.
//
// Threads: execute may block (disk, the time budget). One call at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/resources/store.h"

struct sqlite3;

namespace zn::broker {

struct SqlLimits {
  size_t max_statement_bytes = 64 * 1024;
  int max_params = 256;
  size_t max_rows = 10000;
  size_t max_result_bytes = 4 * 1024 * 1024;  // rows as JSON, estimated while stepping
  size_t max_value_bytes = 1024 * 1024;       // one string or blob, in or out
  std::chrono::milliseconds time_budget{2000};
  uint64_t max_vm_steps = 0;                 // 0: bounded by time only
  uint64_t max_memory_bytes = 256ull << 20;  // SQLite's heap in the call's process
};

struct SqlStoreOptions {
  std::string path;  // the operator's file
  AccessMode mode = AccessMode::kReadOnly;
  bool create_if_missing = false;  // rw only; otherwise a missing file is a setup error
  uint64_t quota_bytes = 0;        // rw: the file's maximum size; 0: no quota
  SqlLimits limits;
  // The zn-sql-call executable that runs each call (SqlStore); unused here.
  std::string helper;
};

struct SqlOutcome {
  nlohmann::json rows = nlohmann::json::array();  // [{column: value}], blobs as {"base64": ...}
  int64_t changes = 0;                            // rows a write changed (sqlite3_changes64)
};

class SqlConnection {
 public:
  // Opens and configures the connection. Throws std::runtime_error (setup:
  // zerod's config names the file).
  explicit SqlConnection(SqlStoreOptions options);
  ~SqlConnection();
  SqlConnection(const SqlConnection&) = delete;
  SqlConnection& operator=(const SqlConnection&) = delete;

  // Runs exactly one statement, its budget counted from now. params: a JSON array for positional
  // parameters (?, ?NNN), an object for named ones (:name, @name, $name:
  // keys without the prefix), or null for none. A value is null, a boolean
  // (0/1), an integer, a float, a string, or {"base64": "..."} for a blob.
  // Text that is not valid UTF-8 comes back as {"base64": ...} too.
  StoreResult<SqlOutcome> execute(std::string_view statement, const nlohmann::json& params);

  AccessMode mode() const { return options_.mode; }

 private:
  struct Call;  // one execute's budget and what the authorizer refused
  static int authorize(void* self, int action, const char* a1, const char* a2, const char* db,
                       const char* trigger);
  static int progress(void* self);
  int decide(int action, const char* a1, const char* a2, const char* db);
  StoreResult<SqlOutcome> run(std::string_view statement, const nlohmann::json& params);
  void exec_internal(const char* sql);

  SqlStoreOptions options_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;      // one call at a time on the connection
  bool internal_ = true;  // the store's own statements pass the authorizer
  Call* call_ = nullptr;  // the running execute, for the callbacks
};

}  // namespace zn::broker
