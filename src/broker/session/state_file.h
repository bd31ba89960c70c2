// The sessions' state file, mode 0600 — policies carry resources (secrets).
//
// Two files, so a change costs O(1) bytes and one fsync instead of a rewrite
// of every session (quadratic over a mass create):
//   <path>          a snapshot: {"version":2,"generation":G,"sessions":[...]},
//                   replaced atomically (temp file, fsync, rename, fsync dir).
//                   Version 1 (no generation, no journal) is still read, and
//                   replaced by a version 2 snapshot before the first append
//                   (a zerod that knows no journal then refuses the file).
//   <path>.journal  the changes since that snapshot: a header line naming the
//                   generation G it follows, then one line per change
//                   ("<crc32 hex> {"put":{record}}" or {"delete":"id"}),
//                   each appended and fdatasync'ed before the change returns.
// Replay is the snapshot, then the journal if its generation matches (a
// journal of another generation is one a compaction already folded in: a
// crash fell between the snapshot's rename and the journal's reset). A torn
// last line (no newline, bad checksum: a crash mid-append) is ignored and cut
// off before the next append; a bad line before the last is corruption.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "broker/session/session.h"

namespace zn::broker {

// The journal of one state file. Not thread-safe: the registry's control lock
// serialises it. Every call may block (fsync); throws std::runtime_error or
// std::system_error, after which the files still replay to the state before
// the failed call.
class StateFile {
 public:
  explicit StateFile(std::string path);
  ~StateFile();
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;

  // The records the files replay to (id order not guaranteed). A missing
  // file is an empty list; a corrupt one throws std::runtime_error. Cuts a
  // torn last journal line off, so appends follow the last good one.
  std::vector<SessionRecord> load();

  // A session created or changed (the whole record), or deleted.
  void put(const SessionRecord& record);
  void erase(const std::string& id);

  // True once the journal holds more than kCompactFactor changes per live
  // session (at least kCompactMin): time to compact(), which keeps the
  // amortised cost of a change O(1) and the files O(live sessions).
  bool compaction_due(size_t live) const;
  // Writes `live` as a new snapshot and starts an empty journal after it.
  void compact(const std::vector<SessionRecord>& live);

  size_t journal_records() const { return journal_records_; }
  std::string journal_path() const { return path_ + ".journal"; }

  static constexpr size_t kCompactFactor = 2, kCompactMin = 64;

 private:
  void open_journal();  // loads first if needed; opens for append
  void append(const std::string& body);

  std::string path_;
  bool loaded_ = false;
  int snapshot_version_ = 0;                    // 0: none yet
  uint64_t generation_ = 0;                     // the snapshot's
  std::optional<uint64_t> journal_generation_;  // the journal header's, if whole
  size_t journal_records_ = 0;
  uint64_t journal_size_ = 0;  // bytes of good lines (header included)
  int journal_fd_ = -1;
};

// A whole snapshot with no journal (what compaction writes), and a replay of
// snapshot + journal without changing the files (tests, tools).
void save_session_records(const std::string& path, const std::vector<SessionRecord>& records);
// A missing file is an empty list; a corrupt one throws std::runtime_error.
std::vector<SessionRecord> load_session_records(const std::string& path);

}  // namespace zn::broker
