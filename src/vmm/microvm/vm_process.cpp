#include "vmm/microvm/vm_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace zn::vmm {
namespace {

constexpr size_t kMaxPassFds = 8;

// Only async-signal-safe calls past fork (zerod has threads).
void fail(int log, const char* step) {
  const char* why = std::strerror(errno);
  (void)!::write(log, "zeroness: vm process: ", 22);
  (void)!::write(log, step, std::strlen(step));
  (void)!::write(log, ": ", 2);
  (void)!::write(log, why, std::strlen(why));
  (void)!::write(log, "\n", 1);
  ::_exit(127);
}

void join(int log, const char* procs) {
  char digits[16];
  int n = 0;
  for (pid_t p = ::getpid(); p > 0 && n < 15; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
  char text[16];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  const int fd = ::open(procs, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text, static_cast<size_t>(n)) != n) fail(log, "joining the cgroup");
  ::close(fd);
}

// Forks on the calling thread; the child's PDEATHSIG follows that thread.
pid_t fork_vm_process(const VmProcessSpec& spec) {
  // Everything the child needs, made before fork.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<const char*> procs;
  for (const std::string& p : spec.cgroup_procs) procs.push_back(p.c_str());
  const std::vector<int>& pass = spec.pass_fds;
  const int log = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log < 0) throw std::runtime_error("cannot open " + spec.log_path + ": " + std::strerror(errno));
  if (::fchown(log, spec.uid, spec.gid) != 0) {
    ::close(log);
    throw std::runtime_error("cannot chown " + spec.log_path + ": " + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid > 0) {
    ::close(log);
    return pid;
  }
  // The child.
  for (const char* p : procs) join(log, p);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(log, "PR_SET_PDEATHSIG");
  if (::getppid() != parent) ::_exit(127);  // zerod went before the line above
  if (::setsid() < 0) fail(log, "setsid");
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0) fail(log, "stdio");
  // Each passed descriptor first moves above every target (so placing one
  // never overwrites another not yet placed), then onto 3, 4, ...; dup2
  // leaves the copy without FD_CLOEXEC.
  const unsigned n = static_cast<unsigned>(pass.size());
  int moved[kMaxPassFds];
  for (unsigned i = 0; i < n; ++i)
    if ((moved[i] = ::fcntl(pass[i], F_DUPFD, static_cast<int>(3 + n))) < 0) fail(2, "passing descriptors");
  for (unsigned i = 0; i < n; ++i)
    if (::dup2(moved[i], static_cast<int>(3 + i)) < 0) fail(2, "passing descriptors");
  // Nothing else of zerod's: no control socket, no map, no key file.
  if (::syscall(SYS_close_range, 3u + n, ~0u, 0u) != 0) fail(2, "close_range");
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) fail(2, "chdir");
  if (::setgroups(spec.groups.size(), spec.groups.data()) != 0) fail(2, "setgroups");
  if (::setresgid(spec.gid, spec.gid, spec.gid) != 0) fail(2, "setresgid");
  if (::setresuid(spec.uid, spec.uid, spec.uid) != 0) fail(2, "setresuid");
  // A change of credentials clears the parent-death signal (the kernel's
  // commit_creds): set it again as the VM's uid, and check zerod is still
  // there, or the VM would outlive it.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(2, "PR_SET_PDEATHSIG");
  if (::getppid() != parent) ::_exit(127);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail(2, "no_new_privs");
  ::execv(spec.binary.c_str(), argv.data());
  fail(2, "exec");
  return -1;
}

// PR_SET_PDEATHSIG fires when the thread that forked the child ends, not the
// process: a control connection's thread would take its VM with it. Every VM
// is forked by this one thread, which lives as long as the process.
class Spawner {
 public:
  static Spawner& instance() {
    static Spawner* s = new Spawner();  // never destroyed: its thread runs to the end
    return *s;
  }
  pid_t spawn(const VmProcessSpec& spec) {
    std::unique_lock lock(mu_);
    Job job{&spec};
    queue_.push_back(&job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return job.done; });
    if (job.error) std::rethrow_exception(job.error);
    return job.pid;
  }

 private:
  struct Job {
    const VmProcessSpec* spec;
    pid_t pid = -1;
    std::exception_ptr error;
    bool done = false;
  };
  Spawner() {
    std::thread([this] { run(); }).detach();
  }
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return !queue_.empty(); });
      Job* job = queue_.front();
      queue_.pop_front();
      try {
        job->pid = fork_vm_process(*job->spec);
      } catch (...) {
        job->error = std::current_exception();
      }
      job->done = true;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
};

}  // namespace

pid_t spawn_vm_process(const VmProcessSpec& spec) {
  if (spec.uid == 0 || spec.gid == 0) throw std::runtime_error("a VM never runs as root");
  if (spec.pass_fds.size() > kMaxPassFds) throw std::runtime_error("too many descriptors for a VM");
  return Spawner::instance().spawn(spec);
}

namespace {

std::string describe_exit(int status) {
  if (status < 0) return "gone";
  if (WIFEXITED(status)) return "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

bool VmmProcess::running() {
  if (exited_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    exited_ = true;
    status_ = describe_exit(r == pid_ ? status : -1);
    return false;
  }
  return true;
}

void VmmProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + grace;
  while (running() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) status_ = describe_exit(status);
    exited_ = true;
  }
}

}  // namespace zn::vmm
