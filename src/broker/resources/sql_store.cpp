#include "broker/resources/sql_store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "broker/resources/sql_call.h"
#include "broker/resources/store_io.h"
#include "userspace/net/unique_fd.h"

namespace zn::broker {

namespace {

using Clock = std::chrono::steady_clock;

// How often a running call looks at its cancel flag.
constexpr std::chrono::milliseconds kCancelPoll{10};

StoreFailure failed(const char* step) {
  return store_fail(StoreError::kInternal, std::string("sql call: ") + step + ": " + std::strerror(errno));
}

// A running helper: killed and reaped however the call ends. A killed one is
// reaped on a thread of its own: its exit (freeing a heap of hundreds of
// megabytes) takes tens of milliseconds the answer need not wait for.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      try {
        std::thread([pid = pid_] {
          int status = 0;
          while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
          }
        }).detach();
      } catch (const std::system_error&) {
        wait();  // no thread to spare: reaped here
      }
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // The exit status, once; -1 when it could not be reaped.
  int wait() {
    int status = 0;
    pid_t r;
    do r = ::waitpid(pid_, &status, 0);
    while (r < 0 && errno == EINTR);
    pid_ = -1;
    return r < 0 ? -1 : status;
  }
  void kill() { ::kill(pid_, SIGKILL); }

 private:
  pid_t pid_;
};

}  // namespace

SqlStore::SqlStore(SqlStoreOptions options) : options_(std::move(options)) {
  if (options_.helper.empty() || ::access(options_.helper.c_str(), X_OK) != 0)
    throw std::runtime_error("sql store: no zn-sql-call helper to run statements" +
                             (options_.helper.empty() ? std::string() : " at " + options_.helper));
  // Opened once here for the setup errors (and to create a rw file); every
  // call opens its own connection in its own process.
  SqlConnection check(options_);
}

StoreResult<SqlOutcome> SqlStore::execute(std::string_view statement, const nlohmann::json& params,
                                          const std::atomic<bool>* cancel) const {
  const Clock::time_point started = Clock::now();
  const Clock::time_point deadline = started + options_.limits.time_budget;
  // Checked here first, so that a statement too long to send is refused
  // like one SqlConnection would refuse.
  if (statement.size() > options_.limits.max_statement_bytes)
    return store_fail(
        StoreError::kLimitExceeded,
        "statement length limit (" + std::to_string(options_.limits.max_statement_bytes) + " bytes) passed");

  // The request and the reply go through memory files, not pipes: the
  // request is written whole before the helper starts (no pipe to block on,
  // no SIGPIPE should it die), and the reply is read once it has ended.
  net::UniqueFd in(::memfd_create("zn-sql-request", MFD_CLOEXEC));
  net::UniqueFd out(::memfd_create("zn-sql-reply", MFD_CLOEXEC));
  if (in.get() < 0 || out.get() < 0) return failed("memfd");
  if (!write_all(in.get(), encode_sql_request(options_, statement, params, options_.limits.time_budget)) ||
      ::lseek(in.get(), 0, SEEK_SET) != 0)
    return failed("request");

  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, in.get(), 0);
  ::posix_spawn_file_actions_adddup2(&actions, out.get(), 1);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  // Nothing else of zerod's (its descriptors are not all close-on-exec).
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  ::posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigfillset(&defaults);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &defaults);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string helper = options_.helper;
  char* argv[] = {helper.data(), nullptr};
  char lang[] = "LC_ALL=C";
  char* env[] = {lang, nullptr};
  pid_t pid = -1;
  const int err = ::posix_spawn(&pid, helper.c_str(), &actions, &attr, argv, env);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) {
    errno = err;
    return failed("spawn");
  }
  Child child(pid);
  net::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (pidfd.get() < 0) return failed("pidfd_open");

  const Clock::time_point kill_at = deadline + kGrace;
  for (;;) {
    if (cancel && cancel->load()) return store_fail(StoreError::kForbidden, "the capability was revoked");
    const Clock::time_point now = Clock::now();
    if (now >= kill_at) {
      child.kill();
      return store_fail(
          StoreError::kLimitExceeded,
          "time budget (" + std::to_string(options_.limits.time_budget.count()) + " ms) passed");
    }
    auto wait = std::chrono::ceil<std::chrono::milliseconds>(kill_at - now);
    if (cancel) wait = std::min(wait, kCancelPoll);
    pollfd p{pidfd.get(), POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(wait.count()));
    if (n < 0 && errno != EINTR) return failed("poll");
    if (n > 0) break;  // the helper has ended
  }
  const int status = child.wait();
  if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    // Its CPU limit (the kernel's SIGXCPU/SIGKILL) is the time budget too.
    if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGXCPU || WTERMSIG(status) == SIGKILL))
      return store_fail(StoreError::kLimitExceeded, "time or memory limit passed");
    return store_fail(StoreError::kInternal, "the statement's process failed");
  }
  struct stat st {};
  if (::fstat(out.get(), &st) != 0) return failed("reply");
  // The helper's reply is bounded by the result limit (base64 and JSON
  // escapes included); anything larger is not one of its replies.
  const auto most = static_cast<off_t>(options_.limits.max_result_bytes * 2 + (1 << 20));
  if (st.st_size <= 0 || st.st_size > most)
    return store_fail(StoreError::kInternal, "the statement's process failed");
  std::string reply(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < reply.size()) {
    const ssize_t r = ::pread(out.get(), reply.data() + got, reply.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return failed("reply");
    got += static_cast<size_t>(r);
  }
  return decode_sql_reply(reply);
}

}  // namespace zn::broker
