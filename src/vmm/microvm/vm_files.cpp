#include "vmm/microvm/vm_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace zn::vmm {

std::string read_whole_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_owned(const std::filesystem::path& p, const std::string& bytes, uid_t uid, gid_t gid) {
  {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
    if (!out.flush()) throw std::runtime_error("cannot write " + p.string());
  }
  if (::chown(p.c_str(), uid, gid) != 0 || ::chmod(p.c_str(), 0600) != 0)
    throw std::runtime_error("cannot hand " + p.string() + " to the VM: " + std::strerror(errno));
}

}  // namespace zn::vmm
