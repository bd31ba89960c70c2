#include "broker/audit_export/export_file_reader.h"

#include <zlib.h>

#include <stdexcept>
#include <vector>

namespace zn::broker::audit_export {

void read_export_lines(const std::string& path, const std::function<bool(std::string_view)>& fn,
                       size_t max_line) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (!in) throw std::runtime_error(path + ": cannot be opened");
  std::vector<char> buf(1 << 16);
  std::string line;
  try {
    while (true) {
      const int n = gzread(in, buf.data(), static_cast<unsigned>(buf.size()));
      if (n < 0) {
        int err = 0;
        const char* msg = gzerror(in, &err);
        throw std::runtime_error(path + ": " + (msg ? msg : "read error"));
      }
      if (n == 0) break;
      for (int i = 0; i < n; ++i) {
        if (buf[static_cast<size_t>(i)] == '\n') {
          if (!fn(line)) {
            gzclose(in);
            return;
          }
          line.clear();
        } else {
          line += buf[static_cast<size_t>(i)];
          if (line.size() > max_line) throw std::runtime_error(path + ": a line is longer than the limit");
        }
      }
    }
    if (!line.empty()) fn(line);  // no final newline: the verifier judges it
  } catch (...) {
    gzclose(in);
    throw;
  }
  gzclose(in);
}

}  // namespace zn::broker::audit_export
