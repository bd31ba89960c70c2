#include "broker/audit_export/export_cursor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace zn::broker::audit_export {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error("audit export cursor " + path + ": " + what);
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(path, std::string("write: ") + std::strerror(errno));
    off += static_cast<size_t>(n);
  }
}

}  // namespace

ExportCursor load_export_cursor(const std::string& path, uint64_t start_at) {
  std::ifstream in(path);
  if (!in) {
    if (!std::filesystem::exists(path)) return ExportCursor{start_at, start_at, std::nullopt};
    fail(path, "cannot be read");
  }
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  auto u64 = [&](const nlohmann::json& v) { return v.is_number_unsigned() && v.get<uint64_t>() > 0; };
  if (!j.is_object() || !j.contains("range_start") || !u64(j["range_start"]) || !j.contains("read_from") ||
      !u64(j["read_from"]))
    fail(path, "malformed");
  ExportCursor c;
  c.range_start = j["range_start"].get<uint64_t>();
  c.read_from = j["read_from"].get<uint64_t>();
  if (c.read_from < c.range_start) fail(path, "malformed");
  if (j.contains("dropped")) {
    const nlohmann::json& d = j["dropped"];
    if (!d.is_array() || d.size() != 2 || !u64(d[0]) || !u64(d[1]) ||
        d[0].get<uint64_t>() > d[1].get<uint64_t>())
      fail(path, "malformed dropped range");
    c.dropped = DroppedRange{d[0].get<uint64_t>(), d[1].get<uint64_t>()};
  }
  return c;
}

void save_export_cursor(const std::string& path, const ExportCursor& c) {
  nlohmann::json j = {{"range_start", c.range_start}, {"read_from", c.read_from}};
  if (c.dropped) j["dropped"] = {c.dropped->first, c.dropped->last};
  const std::filesystem::path p(path);
  std::error_code ec;
  std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) fail(path, "cannot create its directory: " + ec.message());
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) fail(path, std::string("open: ") + std::strerror(errno));
  try {
    write_all(fd, j.dump() + "\n", path);
    if (::fsync(fd) != 0) fail(path, std::string("fsync: ") + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail(path, std::string("rename: ") + std::strerror(errno));
  const int dir = ::open(p.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace zn::broker::audit_export
