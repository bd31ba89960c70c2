#include "broker/session/state_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace zn::broker {
namespace {

using json = nlohmann::json;
constexpr int kFormatVersion = 1;

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "write " + path);
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void save_session_records(const std::string& path, const std::vector<SessionRecord>& records) {
  json sessions = json::array();
  for (const auto& r : records)
    sessions.push_back({{"id", r.id},
                        {"session_idx", r.session_idx},
                        {"slot", r.slot},
                        {"device", r.device},
                        {"adopted", r.adopted},
                        {"policy", r.policy_json},
                        {"policy_version", r.policy_version},
                        {"created_unix", r.created_unix}});
  const std::string text = json{{"version", kFormatVersion}, {"sessions", sessions}}.dump(1);

  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + tmp);
  try {
    write_all(fd, text, tmp);
    if (::fsync(fd) != 0) throw std::system_error(errno, std::generic_category(), "fsync " + tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::system_error(errno, std::generic_category(), "rename " + tmp);
}

std::vector<SessionRecord> load_session_records(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  std::vector<SessionRecord> out;
  try {
    json doc = json::parse(text.str());
    if (doc.at("version").get<int>() != kFormatVersion)
      throw std::runtime_error("unsupported state file version");
    for (const auto& s : doc.at("sessions")) {
      SessionRecord r;
      r.id = s.at("id").get<std::string>();
      r.session_idx = s.at("session_idx").get<uint32_t>();
      r.slot = s.at("slot").get<unsigned>();
      r.device = s.at("device").get<std::string>();
      r.adopted = s.at("adopted").get<bool>();
      r.policy_json = s.at("policy").get<std::string>();
      r.policy_version = s.at("policy_version").get<uint64_t>();
      r.created_unix = s.at("created_unix").get<int64_t>();
      out.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error("corrupt state file " + path + ": " + e.what());
  }
  return out;
}

}  // namespace zn::broker
