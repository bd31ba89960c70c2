// The signed command channel (issue 15): command.key (zerod's public command
// key and the agent port), command.exec (streamed), command.put and
// command.get, command.ping, command.provision (an agent's config: secret)
// and command.rotate (a new command key, agents rekeyed).
#pragma once

#include <functional>

#include "broker/commands/command_client.h"
#include "broker/control/server.h"

namespace zn::broker {

// `rotate` makes the next key, rekeys the agents and commits (zerod owns
// the key file); it returns what CommandClient::rotate reports.
void register_command_verbs(ControlServer& server, CommandClient& commands,
                            std::function<nlohmann::json()> rotate);

}  // namespace zn::broker
