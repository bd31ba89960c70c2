// The in-sandbox agent's core (issue 15): one connection, one envelope.
// Nothing runs before the envelope is verified: its signature under the
// pinned key (zerod's, public), its session, its freshness, its nonce
// (never seen within the window), its size and its body's hash. A refusal
// is answered with its reason (a kReject frame) and nothing else happens.
//
// Commands, each body JSON:
//   ping  {}                                      -> result {"pong": true}
//   exec  {"argv": [...], "env": {...}, "cwd": "/", "timeout_ms": N, "stdin": "..."}
//         -> stdout/stderr frames as output comes, then result
//            {"exit_code"|"signal", "duration_ms", "timed_out"}
//   put   {"path": "/abs", "mode": 420} "\n" bytes  -> result {"bytes"}
//   get   {"path": "/abs", "max_bytes": N}       -> data frames, then result {"bytes"}
//   rekey {"key": "<64 hex>"}                     -> result {"rekeyed": true}; later
//         envelopes must verify under the new key (zerod's rotation)
//
// exec may name {"uid", "gid"}; without them a command runs as the agent's
// exec identity (AgentConfig::exec_uid, in a microVM an unprivileged user),
// so the workload cannot read the agent's keys or take over its port.
//
// Every reply frame is sealed under the session's result key and the
// envelope's nonce (reply_seal.h), so zerod can tell the agent's replies
// from anything else that answers on the agent port.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "userspace/command/envelope.h"
#include "userspace/command/replay_cache.h"
#include "userspace/command/reply_seal.h"

namespace zn::command {

struct AgentConfig {
  std::string session;     // the sandbox this agent serves
  PublicKey key{};         // zerod's command key (public), pinned at boot
  ResultKey result_key{};  // seals every reply (secret: the agent's alone in the guest)
  // Who exec runs as when the command names nobody; -1 keeps the agent's.
  int64_t exec_uid = -1, exec_gid = -1;
  // Called (under the agent's lock) with a key a verified rekey pinned, so
  // a restarted agent keeps it. A throw refuses the rekey.
  std::function<void(const PublicKey&)> on_rekey;
  VerifyLimits limits;
  std::chrono::milliseconds read_timeout{10000};  // each read of an envelope arriving
  // A reply zerod does not take for this long ends the command (it is gone,
  // or stopped reading).
  std::chrono::milliseconds write_timeout{std::chrono::minutes(5)};
  uint32_t max_exec_timeout_ms = 3600 * 1000;
  uint64_t max_get_bytes = 16 * 1024 * 1024;
};

// What the exchange runs on. A stream (a TCP connection) has an end zerod
// closes and a peer the agent sees go. A channel (a virtio-serial port) has
// neither: host connections come and go unseen, so the reply starts with a
// sync mark (frames.h kReplySync) and whatever zerod sends after the
// envelope, or the host side closing, cancels the command.
enum class Transport { kStream, kChannel };

struct ServeOutcome {
  bool ran = false;
  std::string type;     // command_type_name, when the header verified
  std::string reason;   // rejection_name when refused; "no_envelope" when nothing came
  bool unread = false;  // refused before the whole envelope was read
};

class Agent {
 public:
  explicit Agent(AgentConfig config);
  // Serves one exchange on `fd`: a connected socket, or a virtio-serial
  // port (blocking or not: every wait is a poll). Reads exactly one
  // envelope, never a byte past it; answers kAccepted once it verified and
  // was admitted, then the command's frames and its result (or one
  // rejection). Nothing at all is sent when the stream ended before its
  // first byte. Thread-safe: exchanges may be served at once.
  ServeOutcome serve(int fd, Transport transport = Transport::kStream);
  const std::string& session() const { return config_.session; }

 private:
  AgentConfig config_;
  std::mutex mu_;  // the replay cache and config_.key
  ReplayCache replay_;
};

}  // namespace zn::command
