// Declared ports (issue 14): session.expose, session.unexpose,
// session.exposed and session.ticket.
#pragma once

#include "broker/control/server.h"
#include "broker/exposure/exposure_service.h"

namespace zn::broker {

void register_exposure_verbs(ControlServer& server, ExposureService& exposures);

}  // namespace zn::broker
