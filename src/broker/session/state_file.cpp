#include "broker/session/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace zn::broker {
namespace {

using json = nlohmann::json;
constexpr int kFormatVersion = 2;  // 1: the snapshot alone, rewritten on every change
constexpr const char* kJournalMagic = "zeroness_session_journal";

[[noreturn]] void fail_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// CRC-32 (IEEE): tells a torn or garbled journal line from a whole one.
uint32_t crc32(const std::string& data) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::string journal_line(const std::string& body) {
  char head[10];
  std::snprintf(head, sizeof(head), "%08x ", crc32(body));
  return head + body + "\n";
}

// The body of a whole journal line (`line` without its newline), or nullopt.
std::optional<std::string> line_body(const std::string& line) {
  if (line.size() < 9 || line[8] != ' ') return std::nullopt;
  uint32_t crc = 0;
  for (int i = 0; i < 8; ++i) {
    const char c = line[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return std::nullopt;
    crc = crc << 4 | static_cast<uint32_t>(v);
  }
  std::string body = line.substr(9);
  if (crc32(body) != crc) return std::nullopt;
  return body;
}

json to_json(const SessionRecord& r) {
  json out = {{"id", r.id},
              {"session_idx", r.session_idx},
              {"slot", r.slot},
              {"device", r.device},
              {"adopted", r.adopted},
              {"policy", r.policy_json},
              {"policy_version", r.policy_version},
              {"created_unix", r.created_unix}};
  if (!r.placeholders.empty()) out["placeholders"] = r.placeholders;
  if (!r.cap_handles.empty()) out["cap_handles"] = r.cap_handles;
  for (const auto& [port, e] : r.exposed)
    out["exposed"][std::to_string(port)] = {
        {"mode", e.public_mode ? "public" : "ticket"}, {"listen_port", e.listen_port}, {"family", e.family}};
  return out;
}

SessionRecord from_json(const json& s) {
  SessionRecord r;
  r.id = s.at("id").get<std::string>();
  r.session_idx = s.at("session_idx").get<uint32_t>();
  r.slot = s.at("slot").get<unsigned>();
  r.device = s.at("device").get<std::string>();
  r.adopted = s.at("adopted").get<bool>();
  r.policy_json = s.at("policy").get<std::string>();
  r.policy_version = s.at("policy_version").get<uint64_t>();
  r.created_unix = s.at("created_unix").get<int64_t>();
  if (auto p = s.find("placeholders"); p != s.end())
    r.placeholders = p->get<std::map<std::string, std::string>>();
  if (auto h = s.find("cap_handles"); h != s.end())
    r.cap_handles = h->get<std::map<std::string, std::string>>();
  if (auto x = s.find("exposed"); x != s.end()) {
    for (const auto& [port, e] : x->items()) {
      ExposedPort p;
      p.public_mode = e.at("mode").get<std::string>() == "public";
      p.listen_port = e.at("listen_port").get<uint16_t>();
      p.family = e.value("family", 4u);
      r.exposed[static_cast<uint16_t>(std::stoul(port))] = p;
    }
  }
  return r;
}

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno("write " + path);
    done += static_cast<size_t>(n);
  }
}

void fsync_dir(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno("open " + dir);
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) fail_errno("fsync " + dir);
}

// Temp file, fsync, rename, fsync of the directory: the file is either the
// old one or the new one after a crash.
void replace_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) fail_errno("open " + tmp);
  try {
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0) fail_errno("fsync " + tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail_errno("rename " + tmp);
  fsync_dir(path);
}

std::string header_body(uint64_t generation) {
  return json{{kJournalMagic, kFormatVersion}, {"generation", generation}}.dump();
}

// What the files replay to, and where the journal's good lines end.
struct Replay {
  std::map<std::string, SessionRecord> records;
  int version = 0;  // the snapshot's; 0 when there is none
  uint64_t generation = 0;
  std::optional<uint64_t> journal_generation;  // of a journal with a whole header
  size_t journal_records = 0;
  uint64_t journal_size = 0;
};

Replay replay(const std::string& path) {
  Replay out;
  if (auto text = read_whole(path)) {
    try {
      const json doc = json::parse(*text);
      const int version = doc.at("version").get<int>();
      if (version != 1 && version != kFormatVersion)
        throw std::runtime_error("unsupported state file version");
      if (version >= 2) out.generation = doc.at("generation").get<uint64_t>();
      out.version = version;
      for (const auto& s : doc.at("sessions")) {
        SessionRecord r = from_json(s);
        std::string id = r.id;
        out.records[id] = std::move(r);
      }
    } catch (const json::exception& e) {
      throw std::runtime_error("corrupt state file " + path + ": " + e.what());
    }
  }
  const std::string jpath = path + ".journal";
  const auto journal = read_whole(jpath);
  if (!journal) return out;
  size_t pos = 0;
  bool header = true;
  while (pos < journal->size()) {
    const size_t nl = journal->find('\n', pos);
    const bool last = nl == std::string::npos || nl + 1 == journal->size();
    const auto body = nl == std::string::npos ? std::nullopt : line_body(journal->substr(pos, nl - pos));
    if (!body) {
      if (last) break;  // torn by a crash mid-append: that change never returned
      throw std::runtime_error("corrupt state journal " + jpath + " at byte " + std::to_string(pos));
    }
    try {
      const json j = json::parse(*body);
      if (header) {
        if (j.at(kJournalMagic).get<int>() != kFormatVersion)
          throw std::runtime_error("unsupported state journal version");
        out.journal_generation = j.at("generation").get<uint64_t>();
        // Already folded into the snapshot by a compaction cut short.
        if (*out.journal_generation != out.generation) return out;
        header = false;
      } else if (j.contains("put")) {
        SessionRecord r = from_json(j.at("put"));
        std::string id = r.id;
        out.records[id] = std::move(r);
        ++out.journal_records;
      } else {
        out.records.erase(j.at("delete").get<std::string>());
        ++out.journal_records;
      }
    } catch (const json::exception& e) {
      throw std::runtime_error("corrupt state journal " + jpath + ": " + e.what());
    }
    pos = nl + 1;
    out.journal_size = pos;
  }
  return out;
}

std::vector<SessionRecord> records_of(Replay&& r) {
  std::vector<SessionRecord> out;
  out.reserve(r.records.size());
  for (auto& [id, record] : r.records) out.push_back(std::move(record));
  return out;
}

}  // namespace

StateFile::StateFile(std::string path) : path_(std::move(path)) {}

StateFile::~StateFile() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

std::vector<SessionRecord> StateFile::load() {
  Replay r = replay(path_);
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = -1;
  generation_ = r.generation;
  snapshot_version_ = r.version;
  journal_generation_ = r.journal_generation;
  journal_records_ = r.journal_records;
  journal_size_ = r.journal_size;
  loaded_ = true;
  return records_of(std::move(r));
}

void StateFile::open_journal() {
  if (!loaded_) load();
  if (journal_fd_ >= 0) return;
  if (snapshot_version_ != kFormatVersion) {
    // No snapshot yet, or a version 1 one: write one of this version first
    // (once), so a zerod that knows no journal refuses the directory rather
    // than silently ignore the changes in it.
    compact(load());
    return;
  }
  const std::string jpath = journal_path();
  if (journal_generation_ != generation_) {
    // None yet, a torn header, or one a compaction folded in: start afresh.
    replace_file(jpath, journal_line(header_body(generation_)));
    journal_generation_ = generation_;
    journal_records_ = 0;
    journal_size_ = journal_line(header_body(generation_)).size();
  }
  const int fd = ::open(jpath.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail_errno("open " + jpath);
  // Cut a torn tail off, so the next line follows the last good one.
  if (::ftruncate(fd, static_cast<off_t>(journal_size_)) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    fail_errno("truncate " + jpath);
  }
  journal_fd_ = fd;
}

void StateFile::append(const std::string& body) {
  open_journal();
  const std::string line = journal_line(body);
  try {
    size_t done = 0;
    while (done < line.size()) {
      ssize_t n = ::pwrite(journal_fd_, line.data() + done, line.size() - done,
                           static_cast<off_t>(journal_size_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_errno("write " + journal_path());
      done += static_cast<size_t>(n);
    }
    if (::fdatasync(journal_fd_) != 0) fail_errno("fdatasync " + journal_path());
  } catch (...) {
    // Undo the partial line; if even that fails, reload before the next
    // append (a torn last line is ignored and cut off then).
    if (::ftruncate(journal_fd_, static_cast<off_t>(journal_size_)) != 0) {
      ::close(journal_fd_);
      journal_fd_ = -1;
      loaded_ = false;
    }
    throw;
  }
  journal_size_ += line.size();
  ++journal_records_;
}

void StateFile::put(const SessionRecord& record) { append(json{{"put", to_json(record)}}.dump()); }

void StateFile::erase(const std::string& id) { append(json{{"delete", id}}.dump()); }

bool StateFile::compaction_due(size_t live) const {
  return journal_records_ > kCompactFactor * std::max(live, kCompactMin);
}

void StateFile::compact(const std::vector<SessionRecord>& live) {
  if (!loaded_) load();
  const uint64_t next = generation_ + 1;
  // Record by record: a JSON tree of every session would cost several times
  // the text at 10k sessions, and the heap keeps what a peak took.
  std::string text = R"({"version":)" + std::to_string(kFormatVersion) + R"(,"generation":)" +
                     std::to_string(next) + R"(,"sessions":[)";
  for (size_t i = 0; i < live.size(); ++i) {
    if (i) text += ',';
    text += to_json(live[i]).dump();
  }
  text += "]}";
  replace_file(path_, text);
  snapshot_version_ = kFormatVersion;
  // From the rename on, the old journal replays as folded in (its generation
  // is not the snapshot's): a crash here loses nothing.
  generation_ = next;
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = -1;
  open_journal();  // a fresh one for the new generation
}

void save_session_records(const std::string& path, const std::vector<SessionRecord>& records) {
  StateFile(path).compact(records);
}

std::vector<SessionRecord> load_session_records(const std::string& path) { return records_of(replay(path)); }

}  // namespace zn::broker
