#include "vmm/lab/state.h"

#include <fstream>
#include <stdexcept>

namespace zn::vmm {
namespace fs = std::filesystem;
namespace {

std::optional<pid_t> read_pid(const fs::path& file) {
  std::ifstream in(file);
  long pid = 0;
  if (in >> pid && pid > 0) return static_cast<pid_t>(pid);
  return std::nullopt;
}

void write_or_throw(const fs::path& file, const std::string& text, std::ios::openmode mode) {
  std::ofstream out(file, mode);
  out << text;
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace

LabState::LabState(const std::string& prefix) : dir_(fs::path(kRoot) / prefix) {}

bool LabState::exists() const { return fs::is_directory(dir_); }

void LabState::create() const { fs::create_directories(dir_); }

void LabState::remove() const noexcept {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void LabState::add_guest(const std::string& name) const {
  write_or_throw(dir_ / "guests", name + "\n", std::ios::app);
}

std::vector<std::string> LabState::guests() const {
  std::ifstream in(dir_ / "guests");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) names.push_back(line);
  return names;
}

void LabState::write_pump_pid(const std::string& guest, pid_t pid) const {
  write_or_throw(dir_ / (guest + ".pid"), std::to_string(pid) + "\n", std::ios::trunc);
}

std::optional<pid_t> LabState::pump_pid(const std::string& guest) const {
  return read_pid(dir_ / (guest + ".pid"));
}

std::vector<pid_t> LabState::pump_pids() const {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec))
    if (entry.path().extension() == ".pid")
      if (auto pid = read_pid(entry.path())) pids.push_back(*pid);
  return pids;
}

}  // namespace zn::vmm
