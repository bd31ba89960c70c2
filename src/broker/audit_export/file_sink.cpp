#include "broker/audit_export/file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "broker/audit/event.h"

namespace zn::broker::audit_export {

namespace fs = std::filesystem;

namespace {

std::string errno_text() { return std::strerror(errno); }

uint64_t field_u64(const nlohmann::json& c, const std::string& path, const char* key, uint64_t dflt,
                   uint64_t min, uint64_t max) {
  if (!c.contains(key)) return dflt;
  const auto& v = c[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<uint64_t>() < min || v.get<uint64_t>() > max)
    throw std::invalid_argument(path + "." + key + ": must be an integer " + std::to_string(min) + ".." +
                                std::to_string(max));
  return v.get<uint64_t>();
}

// gzip `from` into `to` (written whole, fsync'ed) and remove `from`.
void gzip_file(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  gzFile out = gzopen(tmp.c_str(), "wb6");
  if (!out) throw SinkError("file sink: cannot create " + tmp);
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    gzclose(out);
    throw SinkError("file sink: cannot read " + from + ": " + errno_text());
  }
  std::vector<char> buf(1 << 16);
  bool ok = true;
  while (true) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    if (gzwrite(out, buf.data(), static_cast<unsigned>(n)) != n) {
      ok = false;
      break;
    }
  }
  ::close(in);
  if (gzclose(out) != Z_OK) ok = false;
  if (ok) {
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ok = ::fsync(fd) == 0;
      ::close(fd);
    }
  }
  if (!ok || ::rename(tmp.c_str(), to.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw SinkError("file sink: cannot compress " + from);
  }
  ::unlink(from.c_str());
}

}  // namespace

FileSinkOptions parse_file_sink(const nlohmann::json& c, const std::string& path) {
  static const char* kKnown[] = {"type", "path", "max_bytes", "max_age_s", "keep", "compress"};
  for (const auto& [k, v] : c.items()) {
    if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* n) { return k == n; }) ==
        std::end(kKnown))
      throw std::invalid_argument(path + "." + k + ": unknown field of a file sink");
  }
  FileSinkOptions o;
  if (!c.contains("path") || !c["path"].is_string() || c["path"].get<std::string>().empty() ||
      c["path"].get<std::string>()[0] != '/')
    throw std::invalid_argument(path + ".path: required, an absolute file path");
  o.path = c["path"].get<std::string>();
  o.max_bytes = field_u64(c, path, "max_bytes", o.max_bytes, 4096, 1ull << 40);
  o.max_age = std::chrono::seconds(field_u64(c, path, "max_age_s", 86400, 1, 365ull * 86400));
  o.keep = field_u64(c, path, "keep", o.keep, 0, 100000);
  if (c.contains("compress")) {
    if (!c["compress"].is_boolean()) throw std::invalid_argument(path + ".compress: must be true or false");
    o.compress = c["compress"].get<bool>();
  }
  return o;
}

FileSink::FileSink(FileSinkOptions options) : options_(std::move(options)) {}

FileSink::~FileSink() { close(); }

void FileSink::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void FileSink::open_file() {
  std::error_code ec;
  fs::create_directories(fs::path(options_.path).parent_path(), ec);
  fd_ = ::open(options_.path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd_ < 0) throw SinkError("file sink: cannot open " + options_.path + ": " + errno_text());
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    close();
    throw SinkError("file sink: " + options_.path + " is not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  // A partial last line (a crash mid-write) is cut off: the batch it
  // belonged to is delivered again whole.
  if (size_ > 0) {
    uint64_t keep = size_;
    char c = 0;
    while (keep > 0 && ::pread(fd_, &c, 1, static_cast<off_t>(keep - 1)) == 1 && c != '\n') --keep;
    if (keep != size_) {
      spdlog::warn("file sink {}: cut {} bytes of a partial last line", options_.path, size_ - keep);
      if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
        close();
        throw SinkError("file sink: cannot truncate " + options_.path + ": " + errno_text());
      }
      size_ = keep;
    }
  }
  // The age counts from when the file was made (its ctime is the best we
  // have: an empty file is new).
  opened_ = size_ == 0 ? std::chrono::system_clock::now()
                       : std::chrono::system_clock::time_point(std::chrono::seconds(st.st_ctim.tv_sec));
}

void FileSink::deliver(const ExportBatch& batch) {
  if (fd_ < 0) open_file();
  std::string buf;
  size_t total = batch.seal_line.size() + 1;
  for (const std::string& l : batch.lines) total += l.size() + 1;
  buf.reserve(total);
  for (const std::string& l : batch.lines) {
    buf += l;
    buf += '\n';
  }
  buf += batch.seal_line;
  buf += '\n';
  size_t off = 0;
  while (off < buf.size()) {
    const ssize_t n = ::write(fd_, buf.data() + off, buf.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errno_text();
      close();  // reopened next time; the partial batch is cut then
      throw SinkError("file sink: write " + options_.path + ": " + why);
    }
    off += static_cast<size_t>(n);
  }
  if (::fdatasync(fd_) != 0) {
    const std::string why = errno_text();
    close();
    throw SinkError("file sink: fsync " + options_.path + ": " + why);
  }
  size_ += buf.size();
  if (size_ >= options_.max_bytes || std::chrono::system_clock::now() - opened_ >= options_.max_age) {
    try {
      rotate();
    } catch (const std::exception& e) {
      // The batch is on disk; a failed rotation is retried after the next one.
      spdlog::error("file sink {}: rotation failed: {}", options_.path, e.what());
    }
  }
}

void FileSink::rotate() {
  close();
  const std::string stamp = format_audit_ts(std::chrono::system_clock::now());
  std::string rotated;
  for (int n = 0;; ++n) {
    rotated = options_.path + "." + stamp + "." + std::to_string(n);
    if (!fs::exists(rotated) && !fs::exists(rotated + ".gz")) break;
  }
  if (::rename(options_.path.c_str(), rotated.c_str()) != 0)
    throw SinkError("file sink: cannot rotate " + options_.path + ": " + errno_text());
  const int dir = ::open(fs::path(options_.path).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  if (options_.compress) gzip_file(rotated, rotated + ".gz");
  prune_rotated();
}

void FileSink::prune_rotated() {
  const fs::path p(options_.path);
  const std::string prefix = p.filename().string() + ".";
  std::vector<fs::path> rotated;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() + 24 &&
        name.find(".tmp") == std::string::npos)
      rotated.push_back(e.path());
  }
  // The UTC stamp sorts by time.
  std::sort(rotated.begin(), rotated.end());
  while (rotated.size() > options_.keep) {
    fs::remove(rotated.front(), ec);
    rotated.erase(rotated.begin());
  }
}

}  // namespace zn::broker::audit_export
