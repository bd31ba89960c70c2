#include "broker/commands/command_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

}  // namespace

CommandClient::CommandClient(const SessionDirectory& sessions, std::shared_ptr<const SigningKey> key,
                             AuditLog& audit, CommandClientOptions options)
    : sessions_(sessions), key_(std::move(key)), audit_(audit), options_(options) {}

std::string CommandClient::public_key_hex() const {
  const auto& pk = key_->public_key();
  std::string hex(pk.size() * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), pk.data(), pk.size());
  hex.pop_back();
  return hex;
}

CommandOutcome CommandClient::run(const std::string& session, command::CommandType type,
                                  const std::string& body, const json& audit_detail,
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
  net::UniqueFd fd;
  try {
    fd = connect_agent(*s, options_.agent_port, options_.connect_timeout);
    const std::string envelope = command::seal_envelope(type, session, body, std::chrono::system_clock::now(),
                                                        [this](std::string_view m) {
                                                          const SigningKey::Signature sig = key_->sign(m);
                                                          command::Signature out;
                                                          std::copy(sig.begin(), sig.end(), out.begin());
                                                          return out;
                                                        });
    send_all(fd.get(), envelope, options_.connect_timeout);
    ::shutdown(fd.get(), SHUT_WR);
  } catch (const CommandError& e) {
    audit_reject("unreachable");
    throw;
  }

  CommandOutcome outcome;
  std::string buf;
  char chunk[65536];
  uint64_t bytes_out = 0;
  bool stopped = false;
  for (;;) {
    std::optional<command::Frame> f;
    try {
      f = command::take_frame(buf);
    } catch (const std::exception& e) {
      audit_reject("bad_reply");
      throw CommandError(std::string("the agent's reply is malformed: ") + e.what());
    }
    if (f) {
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
    if (!wait_for(fd.get(), POLLIN, options_.frame_timeout)) {
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
  if (stopped) {
    audit_reject("client_gone");
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
