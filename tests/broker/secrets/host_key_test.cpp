#include "broker/secrets/host_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace zn::broker {
namespace {

namespace fs = std::filesystem;

class HostKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/zn-hostkey-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/state/host.key";  // the state dir does not exist yet
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file with the given bytes and mode, made as the test wants it.
  void write_file(const std::string& path, const std::string& bytes, mode_t mode) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  // The message of the exception load() throws ("" if it does not throw).
  static std::string refusal(const std::string& path) {
    try {
      HostKey::load(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_, path_;
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(HostKeyTest, MadeOnFirstStartAs0600AndReloadedToTheSameKey) {
  HostKey made = HostKey::load_or_create(path_);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_size, 32);
  EXPECT_EQ(made.id().size(), 16u);
  EXPECT_EQ(made.id().find_first_not_of("0123456789abcdef"), std::string::npos);

  const std::string bytes = slurp(path_);
  EXPECT_EQ(HostKey::load(path_).id(), made.id());
  EXPECT_EQ(HostKey::load_or_create(path_).id(), made.id());  // a restart reuses it
  EXPECT_EQ(slurp(path_), bytes);                             // and never rewrites it
  // The key is the file's bytes: the same bytes elsewhere are the same key.
  write_file(dir_ + "/copy.key", bytes, 0600);
  EXPECT_EQ(HostKey::load(dir_ + "/copy.key").id(), made.id());
}

TEST_F(HostKeyTest, MadeExactly0600WhateverTheUmask) {
  mode_t old = ::umask(0177);
  HostKey::create(path_);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(HostKeyTest, KeysDiffer) {
  EXPECT_NE(HostKey::generate().id(), HostKey::generate().id());
  EXPECT_NE(HostKey::create(dir_ + "/a.key").id(), HostKey::create(dir_ + "/b.key").id());
}

TEST_F(HostKeyTest, CreateNeverOverwrites) {
  HostKey::create(path_);
  const std::string bytes = slurp(path_);
  EXPECT_THROW(HostKey::create(path_), std::runtime_error);
  EXPECT_EQ(slurp(path_), bytes);
}

TEST_F(HostKeyTest, RefusesAMissingKey) {
  const std::string why = refusal(path_);
  EXPECT_NE(why.find(path_), std::string::npos) << why;
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  EXPECT_FALSE(fs::exists(path_));  // load never makes one
}

TEST_F(HostKeyTest, RefusesAKeyOthersCanRead) {
  HostKey::create(path_);
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  std::string why = refusal(path_);
  EXPECT_NE(why.find(path_), std::string::npos) << why;
  EXPECT_NE(why.find("0644"), std::string::npos) << why;
  EXPECT_THROW(HostKey::load_or_create(path_), std::runtime_error);  // not replaced either
  ASSERT_EQ(::chmod(path_.c_str(), 0620), 0);                        // group-writable
  EXPECT_NE(refusal(path_).find("0620"), std::string::npos);
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);  // the positive control
  EXPECT_EQ(refusal(path_), "");
}

TEST_F(HostKeyTest, RefusesAWrongSizeWithoutQuotingIt) {
  const std::string bytes(31, 'Q');
  write_file(path_, bytes, 0600);
  std::string why = refusal(path_);
  EXPECT_NE(why.find("31 bytes"), std::string::npos) << why;
  EXPECT_EQ(why.find("QQQQ"), std::string::npos) << why;
  write_file(path_, std::string(33, 'Q'), 0600);
  EXPECT_NE(refusal(path_).find("33 bytes"), std::string::npos);
  write_file(path_, std::string(32, 'Q'), 0600);  // the positive control
  EXPECT_EQ(refusal(path_), "");
}

TEST_F(HostKeyTest, RefusesASymlink) {
  const std::string real = dir_ + "/real.key";
  HostKey::create(real);
  fs::create_directories(fs::path(path_).parent_path());
  fs::create_symlink(real, path_);
  std::string why = refusal(path_);
  EXPECT_NE(why.find("symbolic link"), std::string::npos) << why;
  EXPECT_THROW(HostKey::load_or_create(path_), std::runtime_error);
  EXPECT_EQ(refusal(real), "");  // the positive control: the file itself loads
  // A dangling symlink is not "missing": create must not follow it either.
  const std::string dangling = dir_ + "/dangling.key";
  fs::create_symlink(dir_ + "/nowhere.key", dangling);
  EXPECT_THROW(HostKey::load_or_create(dangling), std::runtime_error);
  EXPECT_FALSE(fs::exists(dir_ + "/nowhere.key"));
}

TEST_F(HostKeyTest, RefusesADirectory) {
  fs::create_directories(path_);
  EXPECT_NE(refusal(path_).find("not a regular file"), std::string::npos);
}

TEST_F(HostKeyTest, RefusesAKeyOwnedBySomeoneElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (to chown the key away)";
  HostKey::create(path_);
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  std::string why = refusal(path_);
  EXPECT_NE(why.find("owned by uid 65534"), std::string::npos) << why;
  ASSERT_EQ(::chown(path_.c_str(), 0, 0), 0);  // the positive control
  EXPECT_EQ(refusal(path_), "");
}

}  // namespace
}  // namespace zn::broker
