// zerod's side of the signed command channel (issue 15): it seals each
// command for one session under zerod's command key (the only signer),
// reaches that session's agent over the one inward path the datapath has
// for it (a connection from the gateway address with the exposure mark, to
// the agent port every session declares for zerod alone), and relays the
// agent's frames. Every command is audited: command:run (type, argv or
// path, exit code or signal, duration; never stdin or file contents) or
// command:reject (the agent's reason, or why it could not be reached).
// The control plane's: blocks on the network (a command's duration).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/audit/log.h"
#include "broker/identity/signing_key.h"
#include "broker/session/directory.h"
#include "userspace/command/envelope.h"
#include "userspace/command/frames.h"

namespace zn::broker {

struct CommandClientOptions {
  uint16_t agent_port = 7070;
  std::chrono::milliseconds connect_timeout{5000};
  // A frame from the agent must come within this (exec's own timeout is
  // the agent's; this bounds a silent agent).
  std::chrono::milliseconds frame_timeout{std::chrono::minutes(65)};
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
  CommandClient(const SessionDirectory& sessions, std::shared_ptr<const SigningKey> key, AuditLog& audit,
                CommandClientOptions options = {});

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

 private:
  const SessionDirectory& sessions_;
  std::shared_ptr<const SigningKey> key_;
  AuditLog& audit_;
  CommandClientOptions options_;
};

}  // namespace zn::broker
