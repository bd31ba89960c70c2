#include "common/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "common/fair_pool.h"

namespace zn {
namespace {

// What top -H and perf show for the calling thread.
std::string own_comm() {
  std::ifstream f("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(f, name);
  return name;
}

std::string comm_on_thread(const std::string& name) {
  std::string seen;
  std::thread([&] {
    set_thread_name(name);
    seen = own_comm();
  }).join();
  return seen;
}

TEST(ThreadName, NamesTheCallingThread) {
  const std::string before = own_comm();
  EXPECT_EQ(comm_on_thread("zn-audit"), "zn-audit");
  EXPECT_EQ(own_comm(), before);  // only the thread that asked
}

TEST(ThreadName, ALongNameIsCutToWhatLinuxKeeps) {
  // pthread_setname_np alone refuses past 15 bytes: the thread would keep
  // its inherited name.
  EXPECT_EQ(comm_on_thread("zn-proxy-work-0123456789"), "zn-proxy-work-0");
}

TEST(ThreadName, AFairPoolsWorkersCarryItsName) {
  std::string seen;
  {
    FairPool pool(FairLimits{.slots = 1, .per_tenant = 1, .queued = 1}, "zn-test-pool");
    std::promise<void> ran;
    pool.post("t", "",
              {[&] {
                 seen = own_comm();
                 ran.set_value();
               },
               {}});
    ran.get_future().wait();
  }
  EXPECT_EQ(seen, "zn-test-pool");
}

}  // namespace
}  // namespace zn
