#include "broker/resources/blob_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "support/files.h"

namespace zn::broker {
namespace {

using ::zn::test::read_file;
using ::zn::test::write_file;

namespace fs = std::filesystem;

// Every name under dir, recursively, symlinks not followed.
std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

class BlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(root_);
    fs::create_directory(outside_);
    write_file(outside_ / "secret", "outside-secret");
  }

  BlobStoreOptions options(AccessMode mode = AccessMode::kReadWrite) {
    BlobStoreOptions o;
    o.directory = root_.string();
    o.mode = mode;
    return o;
  }

  zn::test::TempDir dir_;
  fs::path root_ = dir_.path() / "root";
  fs::path outside_ = dir_.path() / "outside";  // a sibling of root
};

TEST_F(BlobStoreTest, NestedPathsRoundTrip) {
  BlobStore store(options());
  ASSERT_TRUE(store.put("report.csv", "a,b\n1,2\n").ok());
  ASSERT_TRUE(store.put("runs/2026/12/result.bin", std::string("\0\1\2", 3)).ok());
  auto top = store.get("report.csv");
  ASSERT_TRUE(top.ok()) << top.message();
  EXPECT_EQ(top.value(), "a,b\n1,2\n");
  auto nested = store.get("runs/2026/12/result.bin");
  ASSERT_TRUE(nested.ok()) << nested.message();
  EXPECT_EQ(nested.value(), std::string("\0\1\2", 3));
  EXPECT_EQ(read_file(root_ / "runs/2026/12/result.bin"), std::string("\0\1\2", 3));
  ASSERT_TRUE(store.put("report.csv", "replaced").ok());
  EXPECT_EQ(store.get("report.csv").value(), "replaced");
  ASSERT_TRUE(store.put("empty", "").ok());
  EXPECT_EQ(store.get("empty").value(), "");
  // No temporary file is left behind.
  for (const std::string& name : tree(root_)) EXPECT_EQ(name.find(".zn-tmp-"), std::string::npos) << name;
  EXPECT_EQ(store.get("missing").error(), StoreError::kNotFound);
  EXPECT_EQ(store.get("runs/missing/x").error(), StoreError::kNotFound);
  EXPECT_EQ(store.get("runs/2026").error(), StoreError::kNotFound);  // a directory is not an object
  EXPECT_EQ(store.get("report.csv/x").error(), StoreError::kNotFound);
  EXPECT_EQ(store.put("report.csv/x", "v").error(), StoreError::kBadRequest);
  EXPECT_EQ(store.put("runs", "v").error(), StoreError::kBadRequest);
}

TEST_F(BlobStoreTest, MalformedPathsAreRefused) {
  BlobStore store(options());
  const std::vector<std::string> bad = {"../x",
                                        "a/../../x",
                                        "..",
                                        "a/..",
                                        "/etc/passwd",
                                        "a//b",
                                        "a/",
                                        "/",
                                        "",
                                        "./a",
                                        "a/./b",
                                        std::string("a\0b", 3),
                                        std::string(1100, 'a'),
                                        std::string(256, 'n'),
                                        ".zn-tmp-0123",
                                        "d/.zn-tmp-x"};
  for (const std::string& path : bad) {
    auto g = store.get(path);
    ASSERT_FALSE(g.ok()) << path;
    EXPECT_EQ(g.error(), StoreError::kBadRequest) << path << ": " << g.message();
    auto p = store.put(path, "v");
    ASSERT_FALSE(p.ok()) << path;
    EXPECT_EQ(p.error(), StoreError::kBadRequest) << path << ": " << p.message();
  }
  EXPECT_TRUE(tree(root_).empty());
  EXPECT_EQ(read_file(outside_ / "secret"), "outside-secret");
  EXPECT_EQ(tree(outside_), std::vector<std::string>{"secret"});
  // Positive control: names that merely look alike are fine.
  for (const std::string& path : {std::string("..x"), std::string("a..b/c"), std::string("x."),
                                  std::string(255, 'n'), std::string("zn-tmp-0123")})
    EXPECT_TRUE(store.put(path, "v").ok()) << path;
}

TEST_F(BlobStoreTest, SymlinksCannotLeadOut) {
  fs::create_directory_symlink("/etc", root_ / "etc");
  fs::create_directory_symlink("../outside", root_ / "sib");
  fs::create_symlink("../outside/secret", root_ / "link");
  fs::create_symlink("/etc/passwd", root_ / "passwd");
  fs::create_symlink("../outside/new", root_ / "dangling");
  BlobStore store(options());
  const std::vector<std::string> escapes = {"etc/passwd", "etc/hostname", "sib/secret", "link", "passwd"};
  for (const std::string& path : escapes) {
    auto g = store.get(path);
    ASSERT_FALSE(g.ok()) << path;
    EXPECT_EQ(g.error(), StoreError::kForbidden) << path << ": " << g.message();
    EXPECT_EQ(g.message().find("outside-secret"), std::string::npos);
  }
  for (std::string_view path : {"sib/new", "sib/deeper/new", "link", "dangling", "etc/zn-test"}) {
    auto p = store.put(path, "escaped");
    ASSERT_FALSE(p.ok()) << path;
    EXPECT_EQ(p.error(), StoreError::kForbidden) << path << ": " << p.message();
  }
  EXPECT_EQ(read_file(outside_ / "secret"), "outside-secret");
  EXPECT_EQ(tree(outside_), std::vector<std::string>{"secret"});
  EXPECT_FALSE(fs::exists("/etc/zn-test"));
}

TEST_F(BlobStoreTest, ASymlinkedIntermediateDirectoryIsRefusedEvenInside) {
  fs::create_directory(root_ / "real");
  write_file(root_ / "real" / "f", "inside");
  fs::create_directory_symlink("real", root_ / "alias");
  BlobStore store(options());
  auto via = store.get("alias/f");
  ASSERT_FALSE(via.ok());
  EXPECT_EQ(via.error(), StoreError::kForbidden);
  EXPECT_EQ(store.put("alias/g", "v").error(), StoreError::kForbidden);
  EXPECT_FALSE(fs::exists(root_ / "real" / "g"));
  // Positive control: the real path.
  auto direct = store.get("real/f");
  ASSERT_TRUE(direct.ok()) << direct.message();
  EXPECT_EQ(direct.value(), "inside");
  EXPECT_TRUE(store.put("real/g", "v").ok());
}

TEST_F(BlobStoreTest, AFifoDoesNotHangAGet) {
  ASSERT_EQ(::mkfifo((root_ / "fifo").c_str(), 0600), 0);
  BlobStore store(options());
  EXPECT_EQ(store.get("fifo").error(), StoreError::kNotFound);
  EXPECT_EQ(store.put("fifo", "v").error(), StoreError::kBadRequest);
}

TEST_F(BlobStoreTest, ReadOnlyRefusesPut) {
  write_file(root_ / "data.csv", "dataset");
  BlobStore ro(options(AccessMode::kReadOnly));
  auto p = ro.put("data.csv", "changed");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error(), StoreError::kReadOnly);
  EXPECT_EQ(ro.put("new", "v").error(), StoreError::kReadOnly);
  EXPECT_EQ(ro.get("data.csv").value(), "dataset");
  EXPECT_FALSE(fs::exists(root_ / "new"));
  BlobStore rw(options());  // positive control
  EXPECT_TRUE(rw.put("data.csv", "changed").ok());
  EXPECT_EQ(ro.get("data.csv").value(), "changed");
}

TEST_F(BlobStoreTest, QuotaAndObjectSizeHold) {
  fs::create_directory(root_ / "old");
  write_file(root_ / "old" / "f", std::string(30, 'o'));  // counted at open
  BlobStoreOptions o = options();
  o.quota_bytes = 100;
  o.max_object_bytes = 60;
  BlobStore store(o);
  EXPECT_EQ(store.used_bytes(), 30u);
  EXPECT_EQ(store.put("big", std::string(61, 'b')).error(), StoreError::kTooLarge);
  ASSERT_TRUE(store.put("a", std::string(60, 'a')).ok());  // 90
  auto over = store.put("b", std::string(20, 'b'));        // 110
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error(), StoreError::kQuotaExceeded);
  EXPECT_FALSE(fs::exists(root_ / "b"));
  ASSERT_TRUE(store.put("a", std::string(10, 'a')).ok());  // replacing frees: 40
  ASSERT_TRUE(store.put("b", std::string(20, 'b')).ok());  // 60
  EXPECT_EQ(store.used_bytes(), 60u);
  EXPECT_EQ(BlobStore(o).used_bytes(), 60u);  // a reopen counts the same
  o.max_object_bytes = 5;
  EXPECT_EQ(BlobStore(o).get("a").error(), StoreError::kTooLarge);
}

TEST_F(BlobStoreTest, TheObjectCountHolds) {
  fs::create_directory(root_ / "old");  // counted at open
  BlobStoreOptions o = options();
  o.max_objects = 4;
  BlobStore store(o);
  EXPECT_EQ(store.used_objects(), 1u);
  ASSERT_TRUE(store.put("a", "").ok());       // 2
  ASSERT_TRUE(store.put("d/b", "").ok());     // 4: d and b
  ASSERT_TRUE(store.put("a", "again").ok());  // a replacement is not a new object
  auto file = store.put("c", "");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error(), StoreError::kQuotaExceeded);
  EXPECT_EQ(store.put("e/f", "").error(), StoreError::kQuotaExceeded);
  EXPECT_FALSE(fs::exists(root_ / "e"));
  EXPECT_EQ(store.used_objects(), 4u);
  EXPECT_EQ(BlobStore(o).used_objects(), 4u);
}

TEST_F(BlobStoreTest, AMissingDirectoryIsASetupError) {
  BlobStoreOptions o = options();
  o.directory = (dir_.path() / "absent").string();
  EXPECT_THROW(BlobStore{o}, std::runtime_error);
}

}  // namespace
}  // namespace zn::broker
