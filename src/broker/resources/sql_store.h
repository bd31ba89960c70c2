// A SQL capability's backing store (issue 13): one operator-named SQLite
// database file, one statement per call, parameters and rows as JSON. What
// a statement may do is SqlConnection's (sql_connection.h: the authorizer,
// read-only, SQLite's limits); this is where it runs, and how long.
//
// Every call runs in a process of its own, zn-sql-call (issue 30). A single
// SQLite function call can run for seconds to minutes inside one VM
// instruction (printf with a huge width or precision, instr, replace or trim
// on values near the length limit: O(n*m) in SQLite's code), where neither
// the progress handler nor sqlite3_interrupt reaches it; and one statement
// can make SQLite allocate gigabytes (hundreds of columns of large values in
// one row, a sort of large rows). Bounding those one builtin at a time would
// hold only for the builtins listed, and SQLite's heap limit is process-wide.
// A process per call bounds every one of them by class:
//   - time: the call's process is killed at its deadline (budget + a few
//     milliseconds' grace for its own progress handler to answer first), and
//     RLIMIT_CPU stops it should zerod die first (PDEATHSIG kills it too);
//   - memory: SQLite's hard heap limit in that process is the call's own
//     (max_memory_bytes; NOMEM refused as a limit), RLIMIT_AS behind it;
//   - isolation: one connection per call, no state kept between calls, and
//     no store-wide lock: a slow read on one store or capability holds only
//     its own call, never another's (concurrent writers of a rw file wait on
//     SQLite's own lock, up to the budget).
// A killed rw call leaves its transaction uncommitted: SQLite rolls it back
// (journal or WAL) at the next open, so all or nothing still holds.
// Measured here: the spawn costs about a millisecond or two a call.
//
// A call can be cancelled (its capability revoked): the process is killed
// within 10 ms of the flag, and the call refused (kForbidden).
//
// Threads: execute blocks until the call's process ends (at most the budget
// and the grace); call it off the proxy's loop, from any thread, concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "broker/resources/sql_connection.h"
#include "broker/resources/store.h"

namespace zn::broker {

class SqlStore {
 public:
  // How long past the deadline a call's process may take to answer with its
  // own "time budget" refusal before it is killed.
  static constexpr std::chrono::milliseconds kGrace{20};

  // Checks the helper (options.helper, an executable) and opens the file
  // once here (a rw store with create_if_missing creates it). Throws
  // std::runtime_error (setup: zerod's config names the file).
  explicit SqlStore(SqlStoreOptions options);
  SqlStore(const SqlStore&) = delete;
  SqlStore& operator=(const SqlStore&) = delete;

  // Runs exactly one statement (SqlConnection::execute's parameters and
  // answers) in a process of its own. `cancel`, when given and set, stops
  // the call (kForbidden "revoked").
  StoreResult<SqlOutcome> execute(std::string_view statement, const nlohmann::json& params,
                                  const std::atomic<bool>* cancel = nullptr) const;

  AccessMode mode() const { return options_.mode; }

 private:
  SqlStoreOptions options_;
};

}  // namespace zn::broker
