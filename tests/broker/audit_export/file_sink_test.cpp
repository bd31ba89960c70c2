// The rotating file sink on a real file system: whole batches, rotation at a
// batch boundary with gzip, the keep bound, a torn tail cut on reopening,
// and a rotated set that verifies in order.
#include "broker/audit_export/file_sink.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "export_fixture.h"

namespace zn::broker::audit_export::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class FileSinkTest : public ExportFixture {
 protected:
  std::vector<fs::path> rotated() {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir.path() / "out"))
      if (e.path().filename() != "audit.jsonl") out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(FileSinkTest, RotatesAtABatchBoundaryCompressesAndTheSetVerifiesInOrder) {
  FileSinkOptions f;
  f.path = dir.file("out/audit.jsonl");
  f.max_bytes = 4096;
  f.keep = 100;
  ExportSettings s;
  s.batch_max = 5;
  auto exp = std::make_unique<AuditExporter>(options(s), std::make_unique<FileSink>(f), sealer, nullptr);
  append(120);
  ASSERT_TRUE(exp->drain(20s));
  exp.reset();
  const auto files = rotated();
  ASSERT_GE(files.size(), 3u);
  std::vector<std::string> all;
  for (const fs::path& p : files) {
    EXPECT_EQ(p.extension(), ".gz") << p;
    std::ifstream in(p, std::ios::binary);
    char magic[2] = {};
    in.read(magic, 2);
    EXPECT_EQ(static_cast<unsigned char>(magic[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>(magic[1]), 0x8b);
    const auto lines = file_lines(p.string());
    ASSERT_FALSE(lines.empty());
    EXPECT_TRUE(is_seal_line(lines.back())) << p << " does not end with a seal";
    all.insert(all.end(), lines.begin(), lines.end());
  }
  // The last batch may have rotated the file away.
  const auto current = fs::exists(dir.file("out/audit.jsonl")) ? file_lines(dir.file("out/audit.jsonl"))
                                                               : std::vector<std::string>{};
  all.insert(all.end(), current.begin(), current.end());
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const auto r = verify_lines(all, v);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 120u);
  // Without one rotated file in the middle the set does not verify.
  std::vector<std::string> gap;
  for (size_t i = 0; i < files.size(); ++i) {
    if (i == 1) continue;
    const auto lines = file_lines(files[i].string());
    gap.insert(gap.end(), lines.begin(), lines.end());
  }
  gap.insert(gap.end(), current.begin(), current.end());
  EXPECT_FALSE(verify_lines(gap, v).ok);
}

TEST_F(FileSinkTest, KeepsAtMostKeepRotatedFiles) {
  FileSinkOptions f;
  f.path = dir.file("out/audit.jsonl");
  f.max_bytes = 4096;
  f.keep = 2;
  f.compress = false;
  ExportSettings s;
  s.batch_max = 5;
  auto exp = std::make_unique<AuditExporter>(options(s), std::make_unique<FileSink>(f), sealer, nullptr);
  append(120);
  ASSERT_TRUE(exp->drain(20s));
  exp.reset();
  const auto files = rotated();
  EXPECT_EQ(files.size(), 2u);
  for (const fs::path& p : files) EXPECT_NE(p.extension(), ".gz");
}

TEST_F(FileSinkTest, ATornLastLineIsCutAndTheBatchWrittenAgainVerifies) {
  FileSinkOptions f;
  f.path = dir.file("out/audit.jsonl");
  {
    auto exp = std::make_unique<AuditExporter>(options(), std::make_unique<FileSink>(f), sealer, nullptr);
    append(3);
    ASSERT_TRUE(exp->drain(10s));
  }
  {
    std::ofstream out(f.path, std::ios::app);
    out << R"({"zn":"audit","seq":4,"ts":"2026-)";  // a crash mid-write
  }
  auto exp = std::make_unique<AuditExporter>(options(), std::make_unique<FileSink>(f), sealer, nullptr);
  append(3);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = file_lines(f.path);
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const auto r = verify_lines(lines, v);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 6u);
  struct stat st {};
  ASSERT_EQ(::stat(f.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(FileSinkSettings, EveryFieldIsChecked) {
  const std::string p = "$.audit_sinks[0]";
  EXPECT_EQ(parse_file_sink({{"type", "file"}, {"path", "/var/log/zn/a.jsonl"}}, p).path,
            "/var/log/zn/a.jsonl");
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"type", "file"}}, "$.audit_sinks[0].path"},
      {{{"type", "file"}, {"path", "relative.jsonl"}}, "$.audit_sinks[0].path"},
      {{{"type", "file"}, {"path", "/a"}, {"max_bytes", 10}}, "$.audit_sinks[0].max_bytes"},
      {{{"type", "file"}, {"path", "/a"}, {"max_age_s", 0}}, "$.audit_sinks[0].max_age_s"},
      {{{"type", "file"}, {"path", "/a"}, {"compress", "yes"}}, "$.audit_sinks[0].compress"},
      {{{"type", "file"}, {"path", "/a"}, {"colour", 1}}, "$.audit_sinks[0].colour"},
  };
  for (const auto& [config, field] : bad) {
    try {
      parse_file_sink(config, p);
      ADD_FAILURE() << config.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  }
}

TEST(ExportSettingsParse, SharedFieldsAreCheckedAndTypeFieldsSplitOff) {
  const nlohmann::json sink = {{"name", "siem"},
                               {"type", "file"},
                               {"path", "/a"},
                               {"format", "ocsf"},
                               {"events", {"egress:", "dns:deny"}},
                               {"spool_max_records", 50}};
  const ExportSettings s = parse_export_settings(sink, "$.audit_sinks[0]");
  EXPECT_EQ(s.name, "siem");
  EXPECT_EQ(s.format, ExportFormat::kOcsf);
  EXPECT_EQ(s.spool_max_records, 50u);
  EXPECT_EQ(type_fields(sink), (nlohmann::json{{"type", "file"}, {"path", "/a"}}));
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {{{"type", "file"}}, ".name"},
      {{{"name", "Bad Name"}, {"type", "file"}}, ".name"},
      {{{"name", "a"}}, ".type"},
      {{{"name", "a"}, {"type", "file"}, {"format", "cef"}}, ".format"},
      {{{"name", "a"}, {"type", "file"}, {"events", {"egress:nope"}}}, ".events[0]"},
      {{{"name", "a"}, {"type", "file"}, {"events", {"nope:"}}}, ".events[0]"},
      {{{"name", "a"}, {"type", "file"}, {"sessions", nlohmann::json::array()}}, ".sessions"},
      {{{"name", "a"}, {"type", "file"}, {"spool_max_records", 0}}, ".spool_max_records"},
      {{{"name", "a"}, {"type", "file"}, {"backoff_initial_ms", 5000}, {"backoff_max_ms", 100}},
       ".backoff_max_ms"},
  };
  for (const auto& [config, field] : bad) {
    try {
      parse_export_settings(config, "$.audit_sinks[0]");
      ADD_FAILURE() << config.dump();
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("$.audit_sinks[0]" + field + ":", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace zn::broker::audit_export::test
