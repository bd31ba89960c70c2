#include "broker/resources/store_set.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"
#include "support/files.h"
#include "broker/resources/raw_sql.h"

namespace zn::broker {
namespace {

using ::zn::test::raw_exec;
using ::zn::test::write_file;

namespace fs = std::filesystem;

// The constructor's exception text, "" when it did not throw.
std::string setup_error(const StoreCatalog& catalog) {
  try {
    StoreSet stores(catalog);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

class StoreSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(blobs_);
    raw_exec(ledger_, "CREATE TABLE t(a); INSERT INTO t VALUES(1);");
    catalog_.kv["main"] = {dir_.file("kv.db"), {}};
    catalog_.queue["jobs"] = {dir_.file("queue.db"), {}};
    catalog_.blob["data"].directory = blobs_.string();
    catalog_.sql["ledger"].path = ledger_;
    catalog_.sql_helper = ZN_SQL_CALL_BIN;
  }

  zn::test::TempDir dir_;
  fs::path blobs_ = dir_.path() / "blobs";
  std::string ledger_ = dir_.file("ledger.db");
  StoreCatalog catalog_;
};

TEST_F(StoreSetTest, OpensAGoodCatalog) {
  EXPECT_EQ(setup_error(catalog_), "");  // the positive control of the refusals below
  EXPECT_TRUE(fs::exists(dir_.file("kv.db")));
  EXPECT_TRUE(fs::exists(dir_.file("queue.db")));
  EXPECT_EQ(setup_error(StoreCatalog{}), "");  // no stores at all is a valid config
}

TEST_F(StoreSetTest, AMissingBlobDirectoryStopsZerod) {
  catalog_.blob["reports"].directory = (dir_.path() / "no-such-dir").string();
  const std::string e = setup_error(catalog_);
  EXPECT_NE(e.find("blob store \"reports\""), std::string::npos) << e;
  EXPECT_NE(e.find("no-such-dir"), std::string::npos) << e;  // the operator is told which
}

TEST_F(StoreSetTest, AMissingSqlFileStopsZerod) {
  catalog_.sql["books"].path = dir_.file("books.db");
  const std::string e = setup_error(catalog_);
  EXPECT_NE(e.find("sql store \"books\""), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(dir_.file("books.db")));  // a ro check creates nothing
}

TEST_F(StoreSetTest, ASqlFileThatIsNoDatabaseStopsZerod) {
  write_file(dir_.file("junk.db"), std::string(4096, 'x'));
  catalog_.sql["junk"].path = dir_.file("junk.db");
  const std::string e = setup_error(catalog_);
  EXPECT_NE(e.find("sql store \"junk\""), std::string::npos) << e;
}

TEST_F(StoreSetTest, AKvFileThatCannotBeOpenedStopsZerod) {
  catalog_.kv["broken"] = {(dir_.path() / "no-such-dir" / "kv.db").string(), {}};
  const std::string e = setup_error(catalog_);
  EXPECT_NE(e.find("kv store \"broken\""), std::string::npos) << e;
  catalog_.kv.erase("broken");
  catalog_.queue["broken"] = {(dir_.path() / "no-such-dir" / "q.db").string(), {}};
  EXPECT_NE(setup_error(catalog_).find("queue store \"broken\""), std::string::npos);
}

TEST_F(StoreSetTest, ASqlStoreZerodMayCreateIsCreatedAtStart) {
  catalog_.sql["scratch"].path = dir_.file("scratch.db");
  catalog_.sql["scratch"].create_if_missing = true;
  StoreSet stores(catalog_);
  EXPECT_TRUE(fs::exists(dir_.file("scratch.db")));
  auto rw = stores.sql("scratch", AccessMode::kReadWrite);
  ASSERT_TRUE(rw.ok()) << rw.message();
  ASSERT_TRUE(rw.value()->execute("CREATE TABLE r(x)", nullptr).ok());
  auto ro = stores.sql("scratch", AccessMode::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.message();
  EXPECT_TRUE(ro.value()->execute("SELECT count(*) FROM r", nullptr).ok());
}

TEST_F(StoreSetTest, MissingNamesTheKindAndStore) {
  StoreSet stores(catalog_);
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kKv, false, "main"}), std::nullopt);
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kQueue, false, "jobs"}), std::nullopt);
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kBlob, true, "data"}), std::nullopt);
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kSql, true, "ledger"}), std::nullopt);
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kSql, true, "books"}),
            "no sql store \"books\" in zerod's config");
  // A store of another kind by that name does not count.
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kBlob, false, "main"}),
            "no blob store \"main\" in zerod's config");
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kKv, false, "ledger"}),
            "no kv store \"ledger\" in zerod's config");
  EXPECT_EQ(stores.missing(Capability{CapabilityKind::kQueue, false, "default"}),
            "no queue store \"default\" in zerod's config");
}

TEST_F(StoreSetTest, AccessorsRefuseUnconfiguredStoresWithoutAPath) {
  StoreSet stores(catalog_);
  ASSERT_TRUE(stores.kv("main").ok());
  for (const StoreFailure& f : {stores.kv("nope").failure(), stores.queue("nope").failure(),
                                stores.blob("nope", AccessMode::kReadOnly).failure(),
                                stores.blob("nope", AccessMode::kReadWrite).failure(),
                                stores.sql("nope", AccessMode::kReadOnly).failure(),
                                stores.sql("nope", AccessMode::kReadWrite).failure()}) {
    EXPECT_EQ(f.code, StoreError::kInternal);
    EXPECT_EQ(f.message, "store unavailable");
  }
}

TEST_F(StoreSetTest, ForgetErasesAKvCapabilitysKeysOnly) {
  StoreSet stores(catalog_);
  auto kv = stores.kv("main");
  ASSERT_TRUE(kv.ok());
  const KvCapability gone{capability_store_id("cap:gone"), AccessMode::kReadWrite, kv.value().quota};
  const KvCapability kept{capability_store_id("cap:kept"), AccessMode::kReadWrite, kv.value().quota};
  ASSERT_TRUE(kv.value().store->put(gone, "k1", "v").ok());
  ASSERT_TRUE(kv.value().store->put(gone, "k2", "v").ok());
  ASSERT_TRUE(kv.value().store->put(kept, "k1", "v").ok());

  ASSERT_TRUE(stores.forget(CapabilityKind::kKv, "main", gone.id).ok());
  EXPECT_EQ(kv.value().store->get(gone, "k1").error(), StoreError::kNotFound);
  EXPECT_EQ(kv.value().store->get(gone, "k2").error(), StoreError::kNotFound);
  EXPECT_TRUE(kv.value().store->get(kept, "k1").ok());

  auto unknown = stores.forget(CapabilityKind::kKv, "nope", gone.id);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.message(), "no kv store \"nope\" in zerod's config");
  // The operator's blob and SQL data is shared and stays.
  EXPECT_TRUE(stores.forget(CapabilityKind::kSql, "ledger", gone.id).ok());
  EXPECT_TRUE(fs::exists(ledger_));
}

TEST_F(StoreSetTest, ForgetErasesAQueueCapabilitysMessages) {
  StoreSet stores(catalog_);
  auto q = stores.queue("jobs");
  ASSERT_TRUE(q.ok());
  const QueueCapability gone{capability_store_id("cap:gone"), q.value().quota};
  const QueueCapability kept{capability_store_id("cap:kept"), q.value().quota};
  ASSERT_TRUE(q.value().store->send(gone, "m").ok());
  ASSERT_TRUE(q.value().store->send(kept, "m").ok());
  ASSERT_TRUE(stores.forget(CapabilityKind::kQueue, "jobs", gone.id).ok());
  using std::chrono::seconds;
  EXPECT_FALSE(q.value().store->receive(gone, seconds(1)).value().has_value());
  EXPECT_TRUE(q.value().store->receive(kept, seconds(1)).value().has_value());
}

// The rw SQL instance is opened at its first rw use, not at start: a file
// gone by then makes that use fail ("store unavailable", no path), and the
// next use after it is back succeeds (a failed open is not remembered).
TEST_F(StoreSetTest, ReadWriteSqlIsOpenedLazilyAndRetried) {
  StoreSet stores(catalog_);
  ASSERT_TRUE(fs::remove(ledger_));
  // Each call opens the file in its own process (issue 30): a removed file
  // is unavailable, named to the guest without its path.
  auto ro = stores.sql("ledger", AccessMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  auto gone = ro.value()->execute("SELECT a FROM t", nullptr);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.message(), "store unavailable");
  auto rw = stores.sql("ledger", AccessMode::kReadWrite);
  ASSERT_FALSE(rw.ok());
  EXPECT_EQ(rw.error(), StoreError::kInternal);
  EXPECT_EQ(rw.message(), "store unavailable");

  raw_exec(ledger_, "CREATE TABLE fresh(b);");
  auto again = stores.sql("ledger", AccessMode::kReadWrite);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(again.value()->execute("INSERT INTO fresh VALUES(1)", nullptr).ok());  // the new file's table
  auto same = stores.sql("ledger", AccessMode::kReadWrite);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same.value(), again.value());                                 // opened once
  EXPECT_TRUE(ro.value()->execute("SELECT b FROM fresh", nullptr).ok());  // the file as it is now
}

// The rw blob instance sizes the directory when it opens: at first rw use.
TEST_F(StoreSetTest, ReadWriteBlobIsOpenedLazily) {
  catalog_.blob["data"].quota_bytes = 150;
  StoreSet stores(catalog_);
  write_file(blobs_ / "arrived-later", std::string(100, 'a'));  // after start, before the first write
  auto rw = stores.blob("data", AccessMode::kReadWrite);
  ASSERT_TRUE(rw.ok()) << rw.message();
  EXPECT_EQ(rw.value()->used_bytes(), 100u);  // counted: the instance opened just now
  EXPECT_EQ(rw.value()->put("new", std::string(60, 'b')).error(), StoreError::kQuotaExceeded);
  EXPECT_TRUE(rw.value()->put("new", std::string(50, 'b')).ok());
  auto ro = stores.blob("data", AccessMode::kReadOnly);
  ASSERT_TRUE(ro.ok());
  EXPECT_NE(ro.value(), rw.value());
  EXPECT_EQ(ro.value()->used_bytes(), 0u);  // the ro instance, opened at start, saw an empty directory
}

// First rw uses racing from workers (as the gateway's callers do) all get
// the one instance that was kept, and can use it at once.
TEST_F(StoreSetTest, ConcurrentFirstUsesShareOneReadWriteInstance) {
  StoreSet stores(catalog_);
  constexpr int kThreads = 8;
  std::vector<SqlStore*> sql(kThreads, nullptr);
  std::vector<BlobStore*> blob(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      auto s = stores.sql("ledger", AccessMode::kReadWrite);
      auto b = stores.blob("data", AccessMode::kReadWrite);
      if (!s.ok() || !b.ok()) return;
      sql[i] = s.value();
      blob[i] = b.value();
      (void)sql[i]->execute("SELECT count(*) FROM t", nullptr);
      (void)blob[i]->put("from-" + std::to_string(i), "x");
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_NE(sql[i], nullptr) << i;
    ASSERT_NE(blob[i], nullptr) << i;
    EXPECT_EQ(sql[i], sql[0]);
    EXPECT_EQ(blob[i], blob[0]);
  }
  EXPECT_EQ(blob[0]->used_objects(), static_cast<uint64_t>(kThreads));  // one quota saw every put
}

TEST(CapabilityStoreId, IsTheFirstHalfOfSha256OfTheHandle) {
  EXPECT_EQ(capability_store_id("abc"), "ba7816bf8f01cfea414140de5dae2223");  // FIPS 180-2's vector
  const std::string handle = "cap:abcdefghijklmnopqrstuvwxyz234567";
  const std::string id = capability_store_id(handle);
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id, capability_store_id(handle));
  EXPECT_NE(id, capability_store_id("cap:abcdefghijklmnopqrstuvwxyz234566"));
  EXPECT_EQ(id.find("abcdefghij"), std::string::npos);
}

}  // namespace
}  // namespace zn::broker
