// The signed command channel (issue 15): command.key (zerod's public command
// key and the agent port), command.exec (streamed), command.put and
// command.get.
#pragma once

#include "broker/commands/command_client.h"
#include "broker/control/server.h"

namespace zn::broker {

void register_command_verbs(ControlServer& server, CommandClient& commands);

}  // namespace zn::broker
