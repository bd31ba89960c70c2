#include "vmm/microvm/newc_archive.h"

#include <cstdio>
#include <stdexcept>

namespace zn::vmm {
namespace {

constexpr unsigned kFile = 0100000, kDirectory = 0040000;

void pad4(std::string& out) {
  while (out.size() % 4 != 0) out.push_back('\0');
}

// One header (13 fields of 8 hex digits after the magic), the name and its
// NUL, padded to 4; then the data, padded to 4.
void append(std::string& out, unsigned ino, unsigned mode, const std::string& name, const std::string& data) {
  char header[111];
  std::snprintf(header, sizeof header, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino,
                mode, 0u, 0u, 1u, 0u, static_cast<unsigned>(data.size()), 0u, 0u, 0u, 0u,
                static_cast<unsigned>(name.size() + 1), 0u);
  out.append(header, 110);
  out.append(name).push_back('\0');
  pad4(out);
  out.append(data);
  pad4(out);
}

void check_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string::npos)
    throw std::invalid_argument("archive path must be relative and non-empty: '" + path + "'");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = path.find('/', start);
    const std::string segment =
        path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (segment.empty() || segment == "." || segment == "..")
      throw std::invalid_argument("archive path has an empty, '.' or '..' segment: '" + path + "'");
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

}  // namespace

std::string newc_archive(const std::vector<ArchiveEntry>& entries) {
  std::string out;
  unsigned ino = 1;
  for (const ArchiveEntry& e : entries) {
    check_path(e.path);
    const unsigned mode = (e.directory ? kDirectory : kFile) | (e.mode & 07777);
    append(out, ino++, mode, e.path, e.directory ? std::string() : e.contents);
  }
  append(out, 0, 0, "TRAILER!!!", "");
  return out;
}

}  // namespace zn::vmm
