#include "broker/commands/command_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "userspace/net/unique_fd.h"
#include "zn_abi.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Waits for `events` on fd until `timeout`; false on a timeout.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r < 0 && errno == EINTR) continue;
    return r > 0;
  }
}

// A connection to the session's agent, the way the datapath lets in: from
// the gateway's address, marked ZN_MARK_EXPOSE, to the agent port.
net::UniqueFd connect_agent(const Session& s, uint16_t port, std::chrono::milliseconds timeout) {
  net::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw CommandError(std::string("socket: ") + std::strerror(errno));
  const int mark = ZN_MARK_EXPOSE;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) != 0)
    throw CommandError(std::string("SO_MARK: ") + std::strerror(errno));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr = s.net.gateway_ip4;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0)
    throw CommandError(std::string("bind to the gateway address: ") + std::strerror(errno));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr = s.net.guest_ip4;
  to.sin_port = htons(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS)
    throw CommandError(std::string("the agent is unreachable: ") + std::strerror(errno));
  if (!wait_for(fd.get(), POLLOUT, timeout)) throw CommandError("the agent is unreachable: no answer");
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) throw CommandError(std::string("the agent is unreachable: ") + std::strerror(err));
  return fd;
}

// A connection to one of the VM's virtio-serial channels: QEMU's UNIX
// socket for it, in the VM's directory.
net::UniqueFd connect_channel(const std::string& path, std::chrono::milliseconds timeout) {
  net::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) throw CommandError(std::string("socket: ") + std::strerror(errno));
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  if (path.size() >= sizeof(to.sun_path)) throw CommandError("the agent channel's path is too long: " + path);
  std::memcpy(to.sun_path, path.c_str(), path.size());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS &&
      errno != EAGAIN)
    throw CommandError(std::string("the VM's agent channel is not there (is its VM running?): ") +
                       std::strerror(errno));
  if (!wait_for(fd.get(), POLLOUT, timeout)) throw CommandError("the VM's agent channel does not answer");
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err) throw CommandError(std::string("the VM's agent channel: ") + std::strerror(err));
  return fd;
}

void send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!wait_for(fd, POLLOUT, timeout)) throw CommandError("the agent stopped reading");
      continue;
    }
    if (n <= 0) throw CommandError(std::string("the agent went away: ") + std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
}

std::string hex_of(std::span<const unsigned char> bytes) {
  std::string hex(bytes.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes.data(), bytes.size());
  hex.pop_back();
  return hex;
}

constexpr std::string_view kResultKeyDomain = "zeroness/agent-result/v1";

// How long an abandoned command's channel waits for the agent to say it
// ended the command (it kills it at once); past it the channel is used again.
constexpr auto kCancelWait = std::chrono::seconds(30);
// What a channel may carry before the reply's sync mark: leftovers of
// earlier exchanges, bounded by what QEMU holds for a port and a margin.
constexpr size_t kMaxSkippedBeforeSync = 4 << 20;

// Drops what comes before `sync` (a channel's sync mark for this command's
// nonce) and the mark itself, clearing `sync` once found; keeps a tail that
// may be the start of the mark. Returns how many bytes were skipped.
size_t skip_to_sync(std::string& buf, std::string& sync) {
  const size_t at = buf.find(sync);
  const size_t drop = at != std::string::npos     ? at + sync.size()
                      : buf.size() >= sync.size() ? buf.size() - (sync.size() - 1)
                                                  : 0;
  buf.erase(0, drop);
  if (at == std::string::npos) return drop;
  sync.clear();
  return at;
}

}  // namespace

CommandClient::CommandClient(const SessionDirectory& sessions, std::shared_ptr<const SigningKey> key,
                             HostKey result_root, AuditLog& audit, CommandClientOptions options,
                             std::shared_ptr<const SigningKey> previous)
    : sessions_(sessions),
      result_root_(std::move(result_root)),
      audit_(audit),
      options_(options),
      key_(std::move(key)),
      previous_(std::move(previous)) {}

CommandClient::~CommandClient() {
  closing_ = true;
  std::lock_guard lock(cancel_mu_);
  for (Cancellation& c : cancellations_) c.thread.join();
}

void CommandClient::cancel_on_channel(net::UniqueFd fd, std::string channel, std::string buffered,
                                      std::string sync) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t(
      [this, fd = std::move(fd), channel, buf = std::move(buffered), sync = std::move(sync), done]() mutable {
        // The channel goes back early only once the agent's last frame for this
        // command came (it then waits for the next envelope); anything else (no
        // cancel sent, a rest that is not frames) keeps it for the whole bound.
        try {
          send_all(fd.get(), std::string_view(&command::kCancelByte, 1), std::chrono::seconds(1));
        } catch (const std::exception&) {
        }
        const auto until = Clock::now() + kCancelWait;
        bool readable = true, ended = false;
        char chunk[65536];
        while (!ended && !closing_ && Clock::now() < until) {
          if (readable) {
            try {
              if (!sync.empty()) skip_to_sync(buf, sync);
              while (sync.empty() && !ended) {
                std::optional<command::Frame> f = command::take_frame(buf);
                if (!f) break;
                ended = f->kind == command::FrameKind::kResult || f->kind == command::FrameKind::kReject;
              }
            } catch (const std::exception&) {
              readable = false;
            }
          }
          if (!readable) buf.clear();
          if (ended || !wait_for(fd.get(), POLLIN, std::chrono::milliseconds(200))) continue;
          const ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
          if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
          if (n <= 0) break;  // QEMU closed the channel: the VM is gone
          buf.append(chunk, static_cast<size_t>(n));
        }
        fd.reset();
        release_channel(channel);
        *done = true;
      });
  std::lock_guard lock(cancel_mu_);
  for (auto it = cancellations_.begin(); it != cancellations_.end();) {
    if (*it->done) {
      it->thread.join();
      it = cancellations_.erase(it);
    } else {
      ++it;
    }
  }
  cancellations_.push_back({std::move(t), std::move(done)});
}

std::string CommandClient::public_key_hex() const {
  std::lock_guard lock(mu_);
  return hex_of(key_->public_key());
}

command::ResultKey CommandClient::result_key(const std::string& session) const {
  command::ResultKey out{};
  result_root_.with_key([&](std::span<const unsigned char> root) {
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, root.data(), root.size());
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(kResultKeyDomain.data()),
                                  kResultKeyDomain.size());
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(session.data()),
                                  session.size());
    crypto_auth_hmacsha256_final(&st, out.data());
    sodium_memzero(&st, sizeof st);
  });
  return out;
}

std::string CommandClient::agent_config(const std::string& session) const {
  if (!sessions_.get(session)) throw CommandError("no session '" + session + "'");
  command::ResultKey rk = result_key(session);
  std::string out = "# zn-agent --config: secret (the result key); readable by the agent alone\n";
  out += "ZN_SESSION=" + session + "\n";
  out += "ZN_COMMAND_KEY=" + public_key_hex() + "\n";
  out += "ZN_RESULT_KEY=" + command::result_key_hex(rk) + "\n";
  sodium_memzero(rk.data(), rk.size());
  return out;
}

bool CommandClient::rekey(const SigningKey& by, const SigningKey& next, const std::string& session,
                          std::string* reason) {
  try {
    const CommandOutcome o =
        run_signed(by, session, command::CommandType::kRekey, json{{"key", hex_of(next.public_key())}}.dump(),
                   {{"key_id", next.kid()}}, [](const command::Frame&) { return true; });
    if (o.ran && o.result.value("rekeyed", false)) return true;
    *reason = o.ran ? o.result.value("error", "not rekeyed") : o.result.value("reason", "refused");
  } catch (const CommandError& e) {
    *reason = e.what();
  }
  return false;
}

json CommandClient::rotate(std::shared_ptr<const SigningKey> next, const std::vector<std::string>& sessions,
                           const std::function<void()>& commit) {
  std::shared_ptr<const SigningKey> current;
  {
    std::lock_guard lock(mu_);
    current = key_;
  }
  json rekeyed = json::array(), unreached = json::array();
  for (const std::string& id : sessions) {
    std::string reason;
    if (rekey(*current, *next, id, &reason))
      rekeyed.push_back(id);
    else
      unreached.push_back({{"session", id}, {"reason", reason}});
  }
  // Agents that pinned `next` refuse the old key from now on: it is the
  // key in memory whatever the file's rename does.
  {
    std::lock_guard lock(mu_);
    previous_ = current;
    key_ = next;
  }
  audit_.post({"command:rotate",
               "",
               {{"key_id", next->kid()}, {"rekeyed", rekeyed.size()}, {"unreached", unreached.size()}}});
  commit();
  return {{"key_id", next->kid()},
          {"public_key", hex_of(next->public_key())},
          {"rekeyed", rekeyed},
          {"unreached", unreached}};
}

CommandOutcome CommandClient::run(const std::string& session, command::CommandType type,
                                  const std::string& body, const json& audit_detail,
                                  const std::function<bool(const command::Frame&)>& on_frame) {
  std::shared_ptr<const SigningKey> key, previous;
  {
    std::lock_guard lock(mu_);
    key = key_;
    previous = previous_;
  }
  CommandOutcome o = run_signed(*key, session, type, body, audit_detail, on_frame);
  // An agent a rotation did not reach still pins the previous key: rekey
  // it under that key, then ask again (once).
  if (!o.ran && previous && o.result.value("reason", "") == "bad_signature") {
    std::string why;
    if (rekey(*previous, *key, session, &why))
      return run_signed(*key, session, type, body, audit_detail, on_frame);
  }
  return o;
}

std::string CommandClient::acquire_channel(const std::string& session) {
  if (!options_.agent_channels) return "";
  const std::vector<std::string> channels = options_.agent_channels(session);
  if (channels.empty()) return "";
  std::unique_lock lock(channel_mu_);
  std::string chosen;
  const bool free = channel_freed_.wait_for(lock, options_.connect_timeout, [&] {
    for (const std::string& c : channels)
      if (!busy_channels_.count(c)) {
        chosen = c;
        return true;
      }
    return false;
  });
  if (!free)
    throw CommandError("the agent is busy: its " + std::to_string(channels.size()) +
                       " channels each run a command");
  busy_channels_.insert(chosen);
  return chosen;
}

void CommandClient::release_channel(const std::string& path) {
  if (path.empty()) return;
  {
    std::lock_guard lock(channel_mu_);
    busy_channels_.erase(path);
  }
  channel_freed_.notify_all();
}

CommandOutcome CommandClient::run_signed(const SigningKey& key, const std::string& session,
                                         command::CommandType type, const std::string& body,
                                         const json& audit_detail,
                                         const std::function<bool(const command::Frame&)>& on_frame) {
  const SessionPtr s = sessions_.get(session);
  if (!s) throw CommandError("no session '" + session + "'");
  json detail = audit_detail;
  detail["type"] = std::string(command::command_type_name(type));
  const auto start = Clock::now();
  auto audit_reject = [&](const std::string& reason) {
    json d = detail;
    d["reason"] = reason;
    audit_.post({"command:reject", session, d});
  };
  std::string channel;
  // Released when this command is done with it, however that happens: after
  // its connection closed (declared before it, so destroyed after it).
  struct ChannelLease {
    CommandClient& client;
    const std::string& path;
    ~ChannelLease() { client.release_channel(path); }
  } lease{*this, channel};
  net::UniqueFd fd;
  std::string envelope;
  try {
    channel = acquire_channel(session);
  } catch (const CommandError&) {
    audit_reject("busy");
    throw;
  }
  try {
    fd = channel.empty() ? connect_agent(*s, options_.agent_port, options_.connect_timeout)
                         : connect_channel(channel, options_.connect_timeout);
    envelope = command::seal_envelope(type, session, body, std::chrono::system_clock::now(),
                                      [&key](std::string_view m) {
                                        const SigningKey::Signature sig = key.sign(m);
                                        command::Signature out;
                                        std::copy(sig.begin(), sig.end(), out.begin());
                                        return out;
                                      });
    send_all(fd.get(), envelope, options_.connect_timeout);
    // Over TCP the end of what zerod sends; a channel must stay open both
    // ways (QEMU takes a half-close for the host side closing).
    if (channel.empty()) ::shutdown(fd.get(), SHUT_WR);
  } catch (const CommandError& e) {
    audit_reject("unreachable");
    throw;
  }

  // The reply must be the agent's, for this envelope, frame by frame.
  command::ResultKey rk = result_key(session);
  command::ReplyOpener opener(rk, command::envelope_nonce(envelope));
  sodium_memzero(rk.data(), rk.size());
  CommandOutcome outcome;
  std::string buf;
  char chunk[65536];
  uint64_t bytes_out = 0;
  bool stopped = false, accepted = false, answered = false;
  // On a channel the reply starts at the sync mark for this envelope's nonce.
  std::string sync;
  if (!channel.empty()) {
    const command::Nonce nonce = command::envelope_nonce(envelope);
    sync.assign(command::kReplySync);
    sync.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  }
  size_t skipped = 0;
  // However the exchange ends early (the agent silent, a bad reply), the
  // agent may still be running the command: the channel is cancelled and
  // kept until the agent's last frame, never handed to the next command,
  // whose envelope the agent would otherwise take for the cancel.
  try {
    for (;;) {
      if (!sync.empty()) {
        skipped += skip_to_sync(buf, sync);
        if (skipped > kMaxSkippedBeforeSync) {
          audit_reject("bad_reply");
          throw CommandError("the agent's reply never started (no sync mark on its channel)");
        }
      }
      std::optional<command::Frame> f;
      try {
        if (sync.empty()) f = command::take_frame(buf);
      } catch (const std::exception& e) {
        audit_reject("bad_reply");
        throw CommandError(std::string("the agent's reply is malformed: ") + e.what());
      }
      if (f && !opener.open(*f)) {
        audit_reject("unauthenticated_reply");
        throw CommandError(
            "the reply on the agent port is not the agent's: its seal does not verify under the session's "
            "result key (another process on the port, or an agent provisioned for another session)");
      }
      if (f) {
        answered = true;
        if (f->kind == command::FrameKind::kAccepted) {
          if (accepted) {
            audit_reject("bad_reply");
            throw CommandError("the agent's reply is malformed: accepted twice");
          }
          accepted = true;
          continue;
        }
        // Nothing but a refusal comes before the agent accepted the envelope.
        if (!accepted && f->kind != command::FrameKind::kReject) {
          audit_reject("bad_reply");
          throw CommandError("the agent's reply is malformed: output before it accepted the command");
        }
        if (f->kind == command::FrameKind::kResult || f->kind == command::FrameKind::kReject) {
          outcome.ran = f->kind == command::FrameKind::kResult;
          outcome.result = json::parse(f->payload, nullptr, false);
          if (outcome.result.is_discarded()) outcome.result = json{{"reason", "bad_reply"}};
          break;
        }
        bytes_out += f->payload.size();
        if (!on_frame(*f)) {
          stopped = true;
          break;
        }
        continue;
      }
      if (!wait_for(fd.get(), POLLIN, answered ? options_.frame_timeout : options_.accept_timeout)) {
        if (!answered) {
          audit_reject("unreachable");
          throw CommandError("no agent answered within " + std::to_string(options_.accept_timeout.count()) +
                             " ms (none running in the sandbox, or not started yet)");
        }
        audit_reject("agent_silent");
        throw CommandError("the agent went silent");
      }
      const ssize_t n = ::recv(fd.get(), chunk, sizeof chunk, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        audit_reject("agent_closed");
        throw CommandError("the agent closed the connection without a result");
      }
      buf.append(chunk, static_cast<size_t>(n));
    }
  } catch (...) {
    if (!channel.empty())
      cancel_on_channel(std::move(fd), std::exchange(channel, std::string()), std::move(buf),
                        std::move(sync));
    throw;
  }
  if (stopped) {
    audit_reject("client_gone");
    // A channel's agent does not see zerod go: it is told, and the channel
    // waits for it (a TCP agent sees the connection close).
    if (!channel.empty())
      cancel_on_channel(std::move(fd), std::exchange(channel, std::string()), std::move(buf),
                        std::move(sync));
    return outcome;
  }
  if (!outcome.ran) {
    audit_reject(outcome.result.value("reason", "unknown"));
    return outcome;
  }
  json d = detail;
  for (const char* k : {"exit_code", "signal", "timed_out", "bytes", "error"})
    if (outcome.result.contains(k)) d[k] = outcome.result[k];
  d["duration_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  d["bytes_out"] = bytes_out;
  audit_.post({"command:run", session, d});
  return outcome;
}

}  // namespace zn::broker
