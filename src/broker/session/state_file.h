// The sessions' state file: written atomically (temp file, fsync, rename),
// mode 0600 — policies carry resources (secrets).
#pragma once

#include <string>
#include <vector>

#include "broker/session/session.h"

namespace zn::broker {

void save_session_records(const std::string& path, const std::vector<SessionRecord>& records);
// A missing file is an empty list; a corrupt one throws std::runtime_error.
std::vector<SessionRecord> load_session_records(const std::string& path);

}  // namespace zn::broker
