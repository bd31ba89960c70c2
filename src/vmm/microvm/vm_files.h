// Small host-file helpers the VM backends share: a file read whole, and a
// file written for a VM's own uid.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace zn::vmm {

// The file's bytes; "" if it cannot be opened (callers that must tell a
// missing file apart check for it first).
std::string read_whole_file(const std::filesystem::path& p);

// Written 0600 and owned by uid:gid (the VM's directory is 0700 and its
// own); throws std::runtime_error saying which file and why.
void write_owned(const std::filesystem::path& p, const std::string& bytes, uid_t uid, gid_t gid);

}  // namespace zn::vmm
