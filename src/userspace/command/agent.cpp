#include "userspace/command/agent.h"

#include <fcntl.h>
#include <grp.h>
#include <sodium.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "userspace/command/frames.h"
#include "userspace/command/virtio_port.h"

namespace zn::command {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events`; false on a timeout or when the
// other end is gone (a virtio-serial port reports POLLHUP while the host side
// is not connected).
bool wait_ready(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    return (p.revents & events) != 0 || (events == POLLIN && (p.revents & POLLHUP));
  }
}

// On a virtio-serial port the host's side opening and closing reaches the
// guest as control messages on a queue of their own, handled after the data
// queue: the close of zerod's previous connection on a channel can arrive
// after the next connection's envelope, with the open that follows it a
// moment later. A host gone for less than this is that, not the host leaving
// (zerod cancels with a byte; it closes for good only when it goes away).
constexpr auto kHostGrace = std::chrono::seconds(3);

// Whether the host side comes back within kHostGrace.
bool host_returns(int fd) {
  const auto until = Clock::now() + kHostGrace;
  while (!host_connected(fd)) {
    if (Clock::now() >= until) return false;
    ::usleep(10000);
  }
  return true;
}

// Writes all of `data` to a socket or a character device (a virtio-serial
// port), waiting at most `timeout` each time it cannot take more: a reader
// that has gone, or stopped reading, ends the command instead of holding it.
// With `host_may_return` (a channel), a host gone a moment (kHostGrace) is
// waited for.
bool write_all(int fd, std::string_view data, std::chrono::milliseconds timeout, bool host_may_return) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      int r;
      while ((r = ::poll(&p, 1, static_cast<int>(timeout.count()))) < 0 && errno == EINTR) {
      }
      if (r > 0 && (p.revents & POLLOUT)) continue;
      if (r > 0 && host_may_return && (p.revents & POLLHUP) && host_returns(fd)) continue;
      return false;
    }
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// One command's replies: every frame sealed, in order, for its nonce.
struct Replier {
  int fd;
  ReplySealer sealer;
  std::chrono::milliseconds timeout;
  std::string prefix;  // sent before the first frame (a channel's sync mark)
  bool channel = false;
  // On a channel, whether a write waits for a host that is gone a moment
  // (a stale close, kHostGrace): not once this exchange's own read saw the
  // host close, or the next connection would be answered, and drained, as
  // this one.
  bool host_may_return = false;
  bool send(FrameKind kind, std::string_view payload) {
    std::string bytes = std::move(prefix);
    prefix.clear();
    bytes += sealer.seal(kind, payload);
    return write_all(fd, bytes, timeout, host_may_return);
  }
  // On a channel: whether zerod cancelled (sent a byte after the envelope,
  // or its side closed and did not come back within kHostGrace). What it
  // sent is consumed: it was no envelope.
  bool cancelled() const {
    if (!channel) return false;
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 0) < 0 && errno == EINTR) {
    }
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) return false;
    char sink[256];
    size_t got = 0;
    for (ssize_t n; (n = ::read(fd, sink, sizeof sink)) > 0;) got += static_cast<size_t>(n);
    if (got > 0) return true;
    return (p.revents & (POLLHUP | POLLERR)) && !host_returns(fd);
  }
};

Replier replier(int fd, const ResultKey& key, const Nonce& nonce, std::chrono::milliseconds timeout,
                Transport transport) {
  Replier r{fd, ReplySealer(key, nonce), timeout, "", transport == Transport::kChannel};
  r.host_may_return = r.channel;
  if (r.channel) {
    r.prefix.assign(kReplySync);
    r.prefix.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  }
  return r;
}

ServeOutcome reject(Replier& out, Rejection r, const std::string& type = "", const std::string& detail = "") {
  json j = {{"reason", rejection_name(r)}};
  if (!detail.empty()) j["detail"] = detail;
  out.send(FrameKind::kReject, j.dump());
  return ServeOutcome{false, type, std::string(rejection_name(r))};
}

// The nonce where the header has it, for sealing a refusal: what zerod sent
// when it was zerod (a header it could not have sent gets zeros).
Nonce nonce_in(std::string_view header) {
  Nonce n{};
  constexpr size_t kAt = 4 + 1 + 1 + 2;
  if (header.size() >= kAt + n.size()) std::copy_n(header.data() + kAt, n.size(), n.begin());
  return n;
}

// One read towards `want` bytes in `buf` (never past it); false at the end
// of the stream (on a virtio-serial port: the host side closed) or when
// nothing came within `timeout`. Unlike a write, a read does not wait for a
// host that closed to come back: past a close, the next connection's bytes
// would be taken for the rest of this envelope. (A close that is stale, the
// previous connection's, comes after this connection's first bytes and is
// seen only by an envelope that arrives in pieces.)
bool read_some(int fd, std::string& buf, size_t want, std::chrono::milliseconds timeout) {
  char chunk[16384];
  for (;;) {
    if (!wait_ready(fd, POLLIN, timeout)) return false;
    const ssize_t n = ::read(fd, chunk, std::min(sizeof(chunk), want - buf.size()));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

// Reads until `buf` holds `want` bytes; false at the end of the stream or
// on a read that waits longer than `timeout`.
bool read_to(int fd, std::string& buf, size_t want, std::chrono::milliseconds timeout) {
  while (buf.size() < want)
    if (!read_some(fd, buf, want, timeout)) return false;
  return true;
}

int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Runs argv with exactly `env`, streaming its output as frames.
ServeOutcome run_exec(Replier& reply, const json& body, const AgentConfig& config) {
  if (!body.is_object() || !body.contains("argv") || !body["argv"].is_array() || body["argv"].empty())
    return reject(reply, Rejection::kMalformed, "exec", "argv: a non-empty array of strings");
  std::vector<std::string> argv, env;
  for (const auto& a : body["argv"]) {
    if (!a.is_string()) return reject(reply, Rejection::kMalformed, "exec", "argv: strings only");
    argv.push_back(a.get<std::string>());
  }
  if (body.contains("env")) {
    if (!body["env"].is_object())
      return reject(reply, Rejection::kMalformed, "exec", "env: an object of strings");
    for (const auto& [k, v] : body["env"].items()) {
      if (!v.is_string() || k.empty() || k.find('=') != std::string::npos)
        return reject(reply, Rejection::kMalformed, "exec", "env: an object of strings");
      env.push_back(k + "=" + v.get<std::string>());
    }
  }
  const std::string cwd = body.value("cwd", std::string("/"));
  const std::string input = body.value("stdin", std::string());
  const uint64_t timeout_ms = body.value("timeout_ms", uint64_t{60000});
  if (timeout_ms == 0 || timeout_ms > config.max_exec_timeout_ms)
    return reject(reply, Rejection::kMalformed, "exec", "timeout_ms out of range");
  int64_t uid = config.exec_uid, gid = config.exec_gid;
  for (auto [key, slot] : {std::pair{"uid", &uid}, std::pair{"gid", &gid}}) {
    if (!body.contains(key)) continue;
    if (!body[key].is_number_unsigned() || body[key].get<uint64_t>() > 0xfffffffeu)
      return reject(reply, Rejection::kMalformed, "exec", std::string(key) + ": a number");
    *slot = body[key].get<int64_t>();
  }
  if (body.contains("uid") && !body.contains("gid")) gid = uid;

  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
    return reject(reply, Rejection::kMalformed, "exec", std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  // Where argv[0] is looked for: as given when it has a slash, else on the
  // command's own PATH (or the usual one).
  std::vector<std::string> candidates;
  if (argv[0].find('/') != std::string::npos) {
    candidates.push_back(argv[0]);
  } else {
    std::string path = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
    for (const auto& e : env)
      if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
    size_t from = 0;
    for (;;) {
      const size_t colon = path.find(':', from);
      const std::string dir =
          path.substr(from, colon == std::string::npos ? std::string::npos : colon - from);
      candidates.push_back((dir.empty() ? "." : dir) + "/" + argv[0]);
      if (colon == std::string::npos) break;
      from = colon + 1;
    }
  }
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    // The agent blocks SIGIO (a virtio-serial port's wake-up) and ignores
    // SIGPIPE; a command starts with neither (an ignored signal stays
    // ignored across execve: `yes | head` would never end).
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    // The identity before the directory: cwd is checked with the command's
    // own rights. setgroups is a plain syscall here: the child has one thread.
    if (gid >= 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0)) ::_exit(126);
    if (uid >= 0 && ::setresuid(uid, uid, uid) != 0) ::_exit(126);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    // Only async-signal-safe calls from here (the agent has other threads):
    // the candidates were made before fork.
    for (const std::string& full : candidates) ::execve(full.c_str(), cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return reject(reply, Rejection::kMalformed, "exec", std::string("fork: ") + std::strerror(errno));
  }
  // stdin: written whole, then closed (bounded by the body's limit).
  ::signal(SIGPIPE, SIG_IGN);
  for (std::string_view left = input; !left.empty();) {
    const ssize_t n = ::write(in[1], left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    left.remove_prefix(static_cast<size_t>(n));
  }
  ::close(in[1]);

  bool timed_out = false, client_gone = false;
  int open_pipes = 2;
  // On a channel the transport is watched too: zerod cancelling ends it.
  pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {reply.channel ? reply.fd : -1, POLLIN, 0}};
  char buf[16384];
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  while (open_pipes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    const int r = ::poll(fds, 3, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) break;
    if (fds[2].fd >= 0 && fds[2].revents && reply.cancelled()) {
      client_gone = true;
      fds[2].fd = -1;
      ::kill(-pid, SIGKILL);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
        continue;
      }
      if (!client_gone &&
          !reply.send(i == 0 ? FrameKind::kStdout : FrameKind::kStderr, std::string_view(buf, n))) {
        // Nobody to report to: the command is ended, not left running.
        client_gone = true;
        ::kill(-pid, SIGKILL);
      }
    }
  }
  for (int i = 0; i < 2; ++i)  // the pipes (fds[2] is the transport: the caller's)
    if (fds[i].fd >= 0) ::close(fds[i].fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  json result = {{"duration_ms", ms_since(start)}, {"timed_out", timed_out}};
  if (client_gone) result["cancelled"] = true;
  if (WIFEXITED(status)) result["exit_code"] = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result["signal"] = WTERMSIG(status);
  reply.send(FrameKind::kResult, result.dump());
  return ServeOutcome{true, "exec", ""};
}

ServeOutcome run_put(Replier& reply, std::string_view body) {
  const size_t nl = body.find('\n');
  json meta = json::parse(body.substr(0, nl == std::string_view::npos ? body.size() : nl), nullptr, false);
  if (nl == std::string_view::npos || !meta.is_object() || !meta.contains("path") ||
      !meta["path"].is_string())
    return reject(reply, Rejection::kMalformed, "put", "a JSON line {\"path\", \"mode\"} then the bytes");
  const std::string path = meta["path"];
  const unsigned mode = meta.value("mode", 0644u) & 07777u;
  if (path.empty() || path.front() != '/')
    return reject(reply, Rejection::kMalformed, "put", "path must be absolute");
  const std::string_view bytes = body.substr(nl + 1);
  // Whole or not at all: a temporary beside it, renamed over it.
  const std::string tmp = path + ".zn-agent-" + std::to_string(::getpid()) + "-" + std::to_string(::gettid());
  const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  bool ok = out >= 0;
  for (std::string_view left = bytes; ok && !left.empty();) {
    const ssize_t n = ::write(out, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) left.remove_prefix(static_cast<size_t>(n));
  }
  const int e = errno;
  if (out >= 0) ok = (::fchmod(out, mode) == 0) && (::fsync(out) == 0) && (::close(out) == 0) && ok;
  if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    ::unlink(tmp.c_str());
    json j = {{"error", std::strerror(e ? e : errno)}, {"bytes", 0}};
    reply.send(FrameKind::kResult, j.dump());
    return ServeOutcome{true, "put", ""};
  }
  reply.send(FrameKind::kResult, json{{"bytes", bytes.size()}}.dump());
  return ServeOutcome{true, "put", ""};
}

ServeOutcome run_get(Replier& reply, const json& body, const AgentConfig& config) {
  if (!body.is_object() || !body.contains("path") || !body["path"].is_string())
    return reject(reply, Rejection::kMalformed, "get", "{\"path\"}");
  const std::string path = body["path"];
  const uint64_t max =
      std::min<uint64_t>(body.value("max_bytes", config.max_get_bytes), config.max_get_bytes);
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    reply.send(FrameKind::kResult, json{{"error", std::strerror(errno)}, {"bytes", 0}}.dump());
    return ServeOutcome{true, "get", ""};
  }
  struct stat st {};
  ::fstat(in, &st);
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > max) {
    ::close(in);
    reply.send(
        FrameKind::kResult,
        json{{"error", S_ISREG(st.st_mode) ? "larger than max_bytes" : "not a regular file"}, {"bytes", 0}}
            .dump());
    return ServeOutcome{true, "get", ""};
  }
  uint64_t total = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(in, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || total + static_cast<uint64_t>(n) > max) break;
    total += static_cast<uint64_t>(n);
    if (reply.cancelled() || !reply.send(FrameKind::kData, std::string_view(buf, static_cast<size_t>(n))))
      break;
  }
  ::close(in);
  reply.send(FrameKind::kResult, json{{"bytes", total}, {"mode", st.st_mode & 07777}}.dump());
  return ServeOutcome{true, "get", ""};
}

// Pins the key a verified rekey names (the caller holds the agent's lock).
ServeOutcome run_rekey(Replier& out, std::string_view body, AgentConfig& config) {
  const json j = json::parse(body, nullptr, false);
  PublicKey next{};
  size_t len = 0;
  const std::string hex = j.is_object() && j.contains("key") && j["key"].is_string() ? j["key"] : "";
  if (hex.size() != 2 * next.size() ||
      sodium_hex2bin(next.data(), next.size(), hex.data(), hex.size(), nullptr, &len, nullptr) != 0 ||
      len != next.size())
    return reject(out, Rejection::kMalformed, "rekey", "{\"key\": 64 hex digits}");
  if (config.on_rekey) {
    try {
      config.on_rekey(next);
    } catch (const std::exception& e) {
      out.send(FrameKind::kResult, json{{"rekeyed", false}, {"error", e.what()}}.dump());
      return ServeOutcome{true, "rekey", ""};
    }
  }
  config.key = next;
  out.send(FrameKind::kResult, json{{"rekeyed", true}}.dump());
  return ServeOutcome{true, "rekey", ""};
}

}  // namespace

Agent::Agent(AgentConfig config) : config_(std::move(config)) {}

ServeOutcome Agent::serve(int fd, Transport transport) {
  const auto read_timeout = config_.read_timeout;
  PublicKey key;
  {
    std::lock_guard lock(mu_);
    key = config_.key;
  }
  // A refusal before the whole envelope was read: what is left of it is
  // still on the transport (the caller drains it on a virtio-serial port).
  auto refuse_early = [&](Replier& out, Rejection r, const std::string& type = "") {
    ServeOutcome o = reject(out, r, type);
    o.unread = true;
    return o;
  };

  // The header, read only as far as it says it goes (never past kMaxHeaderSize).
  std::string buf;
  EnvelopeHeader header;
  size_t header_size = 0;
  for (;;) {
    const Rejection r = parse_and_verify_header(buf, key, config_.limits, header, &header_size);
    if (r == Rejection::kNone) break;
    if (r != Rejection::kTruncated || buf.size() >= kMaxHeaderSize) {
      Replier early = replier(fd, config_.result_key, nonce_in(buf), config_.write_timeout, transport);
      return refuse_early(early, r);
    }
    // The least that can complete what is there: byte by byte through the
    // fixed part, then exactly the session and signature.
    size_t want = buf.size() + 1;
    if (buf.size() >= kFixedHeaderSize) {
      const size_t session_length =
          static_cast<unsigned char>(buf[6]) << 8 | static_cast<unsigned char>(buf[7]);
      want = std::max(want, kFixedHeaderSize + session_length + kSignatureSize);
    } else {
      want = kFixedHeaderSize;
    }
    // One read at a time, never past what the header can need: garbage is
    // refused as soon as it shows, not after a timeout.
    if (!read_some(fd, buf, std::min(want, kMaxHeaderSize), read_timeout)) {
      // Closed (or silent) before a byte: no command was sent, none refused.
      if (buf.empty()) return ServeOutcome{false, "", "no_envelope"};
      Replier early = replier(fd, config_.result_key, nonce_in(buf), config_.write_timeout, transport);
      early.host_may_return = false;
      return refuse_early(early, Rejection::kTruncated);
    }
  }
  Replier out = replier(fd, config_.result_key, header.nonce, config_.write_timeout, transport);
  const std::string type(command_type_name(header.type));
  std::string body = buf.substr(header_size);
  if (body.size() > header.body_length) return refuse_early(out, Rejection::kBadBodyHash, type);
  if (!read_to(fd, body, header.body_length, read_timeout)) {
    out.host_may_return = false;
    return refuse_early(out, Rejection::kTruncated, type);
  }
  if (const Rejection r = verify_body(header, body); r != Rejection::kNone) return reject(out, r, type);
  {
    std::lock_guard lock(mu_);
    const Rejection r =
        replay_.admit(header, config_.session, std::chrono::system_clock::now(), config_.limits.window);
    if (r != Rejection::kNone) return reject(out, r, type);
  }
  // Verified and admitted: zerod learns an agent is there before the
  // command's first output, however long that takes.
  if (!out.send(FrameKind::kAccepted, "{}")) return ServeOutcome{false, type, "client_gone"};

  switch (header.type) {
    case CommandType::kPing:
      out.send(FrameKind::kResult, json{{"pong", true}, {"session", config_.session}}.dump());
      return ServeOutcome{true, type, ""};
    case CommandType::kExec: {
      const json j = json::parse(body, nullptr, false);
      return run_exec(out, j, config_);
    }
    case CommandType::kPut:
      return run_put(out, body);
    case CommandType::kGet: {
      const json j = json::parse(body, nullptr, false);
      return run_get(out, j, config_);
    }
    case CommandType::kRekey: {
      std::lock_guard lock(mu_);
      return run_rekey(out, body, config_);
    }
  }
  return reject(out, Rejection::kMalformed, type);
}

}  // namespace zn::command
