// A token file as an operator writes one: the token and a newline, mode 0600.
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <string>

namespace zn::broker::test {

inline std::string write_token_file(const std::string& file, const std::string& token, mode_t mode = 0600) {
  std::ofstream(file) << token << "\n";
  ::chmod(file.c_str(), mode);
  return file;
}

}  // namespace zn::broker::test
