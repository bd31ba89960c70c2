// Putting the lab's guests under the datapath: what zerod will do per session,
// reduced to the lab's fixed plan (session index n+1 for guest n, default
// listeners, ports 80/443 steered). Used by zn-lab and the namespace tests.
#pragma once

#include <cstdint>
#include <string>

#include "vmm/lab/lab.h"

namespace zn::lab {

// Where a lab pins its datapath: separate from a real zerod's pins.
std::string lab_pin_root(const std::string& lab_prefix);

// Loads (or re-adopts) the datapath pinned at lab_pin_root(prefix), writes a
// session per guest and attaches to every guest TAP, leaving it attached:
// the lab stays governed after this process exits. Runs in the host netns.
void govern_lab(const vmm::Lab& lab);

// Removes the lab's pins. Filters go with the TAPs when the lab is destroyed.
void ungovern_lab(const std::string& lab_prefix);

}  // namespace zn::lab
