// zerod's side of the signed command channel (issue 15): it seals each
// command for one session under zerod's command key (the only signer),
// reaches that session's agent, and relays the agent's frames. A session
// whose VM has virtio-serial channels (QEMU) is reached through one of them
// (a UNIX socket in the VM's directory: one exchange per connection, one
// command per channel at a time); any other over the one inward path the
// datapath has for it (a connection from the gateway address with the
// exposure mark, to the agent port every session declares for zerod alone). Every command is audited:
// command:run (type, argv or path, exit code or signal, duration; never stdin or file contents) or
// command:reject (the agent's reason, or why it could not be reached).
// The control plane's: blocks on the network (a command's duration).
//
// Every frame of the agent's reply must open under the session's result key
// (reply_seal.h): HMAC-SHA-256 keyed by a key derived from zerod's result
// root (a seed file beside the host key) and the session id. Anything else
// answering on the agent port is refused as `unauthenticated_reply`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/identity/signing_key.h"
#include "broker/secrets/host_key.h"
#include "broker/session/directory.h"
#include "userspace/command/envelope.h"
#include "userspace/command/frames.h"
#include "userspace/command/reply_seal.h"
#include "userspace/net/unique_fd.h"

namespace zn::broker {

struct CommandClientOptions {
  uint16_t agent_port = 7070;
  std::chrono::milliseconds connect_timeout{5000};
  // The agent must say it accepted an envelope (or refuse it) within this
  // of having been sent it: a virtio-serial socket takes the bytes whether
  // an agent is there or not.
  std::chrono::milliseconds accept_timeout{10000};
  // A frame from the agent must come within this (exec's own timeout is
  // the agent's; this bounds a silent agent).
  std::chrono::milliseconds frame_timeout{std::chrono::minutes(65)};
  // The host ends of a session's agent channels (VmRegistry::
  // agent_channels); empty, or no function: the agent port over TCP.
  std::function<std::vector<std::string>(const std::string& session)> agent_channels;
};

// A refusal before any agent was asked (no session, bad request) or the
// agent unreachable: the operator's to act on.
struct CommandError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CommandOutcome {
  bool ran = false;
  nlohmann::json result;  // the agent's result, or {"reason"} when refused
};

class CommandClient {
 public:
  // `previous`: the key before the last rotation, when an agent may still
  // pin it (null when none); used only to send such an agent a rekey.
  CommandClient(const SessionDirectory& sessions, std::shared_ptr<const SigningKey> key, HostKey result_root,
                AuditLog& audit, CommandClientOptions options = {},
                std::shared_ptr<const SigningKey> previous = nullptr);
  ~CommandClient();  // waits for the cancellations still draining a channel (bounded)

  // Runs one command; `on_frame` sees each output or data frame as it comes
  // (returns false to stop: the connection is closed, the agent kills an
  // exec it can no longer report). `audit_detail` is what the audit records
  // of the command (argv, path), chosen by the caller. Throws CommandError.
  CommandOutcome run(const std::string& session, command::CommandType type, const std::string& body,
                     const nlohmann::json& audit_detail,
                     const std::function<bool(const command::Frame&)>& on_frame);

  // zerod's command key, public: what an agent pins.
  std::string public_key_hex() const;
  uint16_t agent_port() const { return options_.agent_port; }

  // The session's result key (secret): HMAC-SHA-256(result root,
  // "zeroness/agent-result/v1" | session).
  command::ResultKey result_key(const std::string& session) const;
  // What the session's agent is started with (zn-agent --config): its
  // session, zerod's public key and its result key. Secret.
  std::string agent_config(const std::string& session) const;

  // Rotation: every listed session's agent is sent a rekey to `next`
  // signed by the current key; then `commit` (the key file's rename) runs
  // and `next` is the key commands are signed with. The old key is kept
  // (in memory) to rekey an agent this did not reach, the first time it
  // refuses a command as bad_signature. Returns {"rekeyed": [...],
  // "unreached": [{"session","reason"}]}; audited as command:rotate.
  nlohmann::json rotate(std::shared_ptr<const SigningKey> next, const std::vector<std::string>& sessions,
                        const std::function<void()>& commit);

 private:
  CommandOutcome run_signed(const SigningKey& key, const std::string& session, command::CommandType type,
                            const std::string& body, const nlohmann::json& audit_detail,
                            const std::function<bool(const command::Frame&)>& on_frame);
  // Sends a rekey to `next`'s public key, signed by `by`; true if pinned.
  bool rekey(const SigningKey& by, const SigningKey& next, const std::string& session, std::string* reason);

  // One of the session's channels no other command holds, waited for up to
  // connect_timeout; "" when there are none (TCP). Throws CommandError.
  std::string acquire_channel(const std::string& session);
  void release_channel(const std::string& path);
  // A command abandoned on a channel (its client went away): the agent is
  // told to cancel it, and the channel stays taken until the agent's last
  // frame for it came (at most kCancelWait), so no later command meets its
  // leftovers. On a thread of its own: the caller returns at once.
  // `sync`: the reply's sync mark if it was not seen yet (else empty).
  void cancel_on_channel(net::UniqueFd fd, std::string channel, std::string buffered, std::string sync);

  const SessionDirectory& sessions_;
  HostKey result_root_;
  AuditLog& audit_;
  CommandClientOptions options_;
  mutable std::mutex mu_;  // the keys: swapped by a rotation
  std::shared_ptr<const SigningKey> key_;
  std::shared_ptr<const SigningKey> previous_;
  std::mutex channel_mu_;  // busy_channels_
  std::condition_variable channel_freed_;
  std::set<std::string> busy_channels_;
  struct Cancellation {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex cancel_mu_;  // cancellations_
  std::list<Cancellation> cancellations_;
  std::atomic<bool> closing_{false};
};

}  // namespace zn::broker
