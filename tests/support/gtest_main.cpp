// The main of every test binary: GoogleTest's, plus a listener that makes a
// run unable to pass by not running.
//
// gtest 1.12 turns an exception (or fatal failure) in SetUpTestSuite into a
// "skipped" result for every test of the suite, and exits 0; ctest then
// reports the tests as skipped and passes. A broken BPF load or lab setup
// would go green. So, when running as root (where every test here can run):
//   - a failed suite setup or teardown fails the binary;
//   - a skipped test fails the binary, unless its skip message starts with
//     kKernelLacks ("kernel lacks <feature>: ..."), the one legitimate reason.
// Without root, "needs root" skips stay skips (a developer's unit-test run).
// scripts/test.sh checks ctest's own record of skips too (ctest marks any
// output with "[  SKIPPED ]" as skipped whatever the exit code).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/skip_policy.h"

namespace {

class NoSilentSkips : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    if (r == nullptr || !r->Skipped()) return;
    std::string message;
    for (int i = 0; i < r->total_part_count(); ++i) {
      const ::testing::TestPartResult& part = r->GetTestPartResult(i);
      if (part.skipped()) message = part.message();
    }
    if (zn::test::skip_is_allowed(message, ::geteuid() == 0)) return;
    problems_.push_back(
        std::string(info.test_suite_name()) + "." + info.name() + " skipped as root: " +
        (message.empty() ? "(no reason given; a failed SetUpTestSuite looks like this)" : message));
  }
  void OnTestSuiteEnd(const ::testing::TestSuite& suite) override {
    if (suite.ad_hoc_test_result().Failed())
      problems_.push_back(std::string("suite ") + suite.name() + ": setup or teardown failed");
  }
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto* guard = new NoSilentSkips;  // owned by gtest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(guard);
  int rc = RUN_ALL_TESTS();
  for (const std::string& p : guard->problems()) std::fprintf(stderr, "zn-test: FAILED: %s\n", p.c_str());
  if (!guard->problems().empty()) rc = 1;
  return rc;
}
