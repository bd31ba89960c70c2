// The state file's journal: one record per change, replayed over the last
// snapshot; a torn last record ignored; compaction atomic. No root.
#include "broker/session/state_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

namespace zn::broker {
namespace {

namespace fs = std::filesystem;

SessionRecord record(const std::string& id, unsigned slot, uint64_t version = 1) {
  SessionRecord r;
  r.id = id;
  r.session_idx = slot + 1;
  r.slot = slot;
  r.device = "zn-tap" + std::to_string(slot);
  r.policy_json = R"({"policy":{"allow":[{"host":"api.github.com"}]}})";
  r.policy_version = version;
  r.created_unix = 1700000000 + slot;
  return r;
}

std::map<std::string, uint64_t> versions(const std::vector<SessionRecord>& records) {
  std::map<std::string, uint64_t> out;
  for (const auto& r : records) out[r.id] = r.policy_version;
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zn-state-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "sessions.json").string(); }
  std::string journal() const { return path() + ".journal"; }
  fs::path dir_;
};

TEST_F(StateFileTest, EachChangeAppendsOneRecordAndLeavesTheSnapshotAlone) {
  StateFile f(path());
  f.put(record("a", 0));
  // The first change writes an (empty) snapshot of this version, once.
  const std::string snapshot = read(path());
  EXPECT_NE(snapshot.find("\"version\":2"), std::string::npos);
  const auto one = fs::file_size(journal());
  f.put(record("b", 1));
  const auto two = fs::file_size(journal());
  f.put(record("a", 0, 2));
  f.erase("b");
  // The snapshot was not rewritten: each change is one line.
  EXPECT_EQ(read(path()), snapshot);
  EXPECT_EQ(f.journal_records(), 4u);
  EXPECT_GT(two, one);
  EXPECT_LT(two - one, 400u);  // one record's worth, whatever came before
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"a", 2}}));
  EXPECT_EQ(fs::status(journal()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

// What a guest was handed (placeholders, capability handles) survives a
// restart: journalled and compacted alike; a record without them reads as none.
TEST_F(StateFileTest, GuestHandedTokensAreKept) {
  SessionRecord a = record("a", 0);
  a.placeholders = {{"stripe", "zn_ph_aaaa"}};
  a.cap_handles = {{"data", "cap:bbbb"}, {"jobs", "cap:cccc"}};
  {
    StateFile f(path());
    f.put(a);
    f.put(record("b", 1));
  }
  auto check = [&](const std::vector<SessionRecord>& loaded) {
    ASSERT_EQ(loaded.size(), 2u);
    const SessionRecord& got = loaded[0].id == "a" ? loaded[0] : loaded[1];
    const SessionRecord& other = loaded[0].id == "a" ? loaded[1] : loaded[0];
    EXPECT_EQ(got.placeholders, a.placeholders);
    EXPECT_EQ(got.cap_handles, a.cap_handles);
    EXPECT_TRUE(other.placeholders.empty());
    EXPECT_TRUE(other.cap_handles.empty());
  };
  check(load_session_records(path()));
  {
    StateFile f(path());
    f.compact(load_session_records(path()));
  }
  check(load_session_records(path()));
}

TEST_F(StateFileTest, ATornLastRecordIsIgnoredAndCutOffBeforeTheNextAppend) {
  {
    StateFile f(path());
    f.put(record("a", 0));
    f.put(record("b", 1));
  }
  // A crash mid-append: the last line lost its tail (and its newline).
  const std::string whole = read(journal());
  write(journal(), whole.substr(0, whole.size() - 20));
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"a", 1}}));
  StateFile f(path());
  EXPECT_EQ(versions(f.load()), (std::map<std::string, uint64_t>{{"a", 1}}));
  f.put(record("c", 2));
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"a", 1}, {"c", 1}}));

  // A whole line whose checksum does not match (garbage written, then a
  // newline) is torn too when last...
  write(journal(), read(journal()) + "0badc0de {\"delete\":\"a\"}\n");
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"a", 1}, {"c", 1}}));
  // ...but corruption before the last line is refused, not skipped.
  write(journal(), read(journal()) + read(journal()).substr(read(journal()).find('\n') + 1));
  EXPECT_THROW(load_session_records(path()), std::runtime_error);
}

TEST_F(StateFileTest, CompactionWritesTheLiveSetAndStartsAnEmptyJournal) {
  StateFile f(path());
  std::map<std::string, uint64_t> model;
  std::vector<SessionRecord> live;
  auto live_records = [&] {
    std::vector<SessionRecord> out;
    for (const auto& [id, v] : model)
      out.push_back(record(id, static_cast<unsigned>(std::stoul(id.substr(1))), v));
    return out;
  };
  size_t compactions = 0;
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "s" + std::to_string(rng() % 40);
    if (rng() % 3 == 0) {
      f.erase(id);
      model.erase(id);
    } else {
      const uint64_t v = model.count(id) ? model[id] + 1 : 1;
      f.put(record(id, static_cast<unsigned>(std::stoul(id.substr(1))), v));
      model[id] = v;
    }
    if (f.compaction_due(model.size())) {
      f.compact(live_records());
      ++compactions;
      EXPECT_EQ(f.journal_records(), 0u);
    }
    // The journal never grows past its bound over the live set.
    ASSERT_LE(f.journal_records(), StateFile::kCompactFactor * StateFile::kCompactMin + 1);
  }
  EXPECT_GT(compactions, 10u);
  EXPECT_EQ(versions(load_session_records(path())), model);
  EXPECT_EQ(versions(StateFile(path()).load()), model);
  EXPECT_EQ(fs::status(path()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(StateFileTest, ACrashBetweenTheSnapshotAndTheJournalResetLosesNothing) {
  StateFile f(path());
  f.put(record("a", 0));
  f.put(record("b", 1));
  f.erase("a");
  const std::string old_journal = read(journal());
  f.compact({record("b", 1)});
  // The rename landed but the fresh journal did not: the old one is back.
  write(journal(), old_journal);
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"b", 1}}));
  StateFile again(path());
  EXPECT_EQ(versions(again.load()), (std::map<std::string, uint64_t>{{"b", 1}}));
  again.put(record("c", 2));  // a fresh journal for the snapshot's generation
  EXPECT_EQ(versions(load_session_records(path())), (std::map<std::string, uint64_t>{{"b", 1}, {"c", 1}}));
}

TEST_F(StateFileTest, TheVersionOneFileIsReadAndJournalledOnto) {
  write(path(), R"({"version":1,"sessions":[{"id":"old","session_idx":1,"slot":0,"device":"zn-tap0",)"
                R"("adopted":false,"policy":"{}","policy_version":3,"created_unix":5}]})");
  StateFile f(path());
  EXPECT_EQ(versions(f.load()), (std::map<std::string, uint64_t>{{"old", 3}}));
  f.put(record("new", 1));
  EXPECT_EQ(versions(load_session_records(path())),
            (std::map<std::string, uint64_t>{{"new", 1}, {"old", 3}}));
  // Rewritten as version 2 before the journal was started.
  EXPECT_NE(read(path()).find("\"version\":2"), std::string::npos);
  write(path(), R"({"version":9,"sessions":[]})");
  EXPECT_THROW(load_session_records(path()), std::runtime_error);
}

TEST_F(StateFileTest, AMissingFileIsEmpty) {
  EXPECT_TRUE(load_session_records(path()).empty());
  EXPECT_TRUE(StateFile(path()).load().empty());
}

}  // namespace
}  // namespace zn::broker
