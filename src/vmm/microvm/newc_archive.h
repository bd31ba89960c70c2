// A cpio archive in the "newc" format, the one the Linux kernel unpacks as an
// initramfs. Archives may be concatenated: the kernel unpacks each in turn
// over the last, so a VM's configuration is the shared image plus a small
// archive of its own (guest_config.h), with no disk and nothing to mount.
#pragma once

#include <string>
#include <vector>

namespace zn::vmm {

struct ArchiveEntry {
  std::string path;      // relative, no leading '/': "zn/guest.conf"; a directory ends without '/'
  unsigned mode = 0644;  // permission bits
  bool directory = false;
  std::string contents;  // files only
};

// The archive's bytes, "TRAILER!!!" included. Throws std::invalid_argument
// for a path that is empty, absolute, or holds a NUL or a ".." segment.
std::string newc_archive(const std::vector<ArchiveEntry>& entries);

}  // namespace zn::vmm
