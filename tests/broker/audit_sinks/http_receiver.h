// A real HTTP(S) receiver: http_receiver.py as a child process on 127.0.0.1
// and an ephemeral port, recording every request in a test's temp dir and
// answering as the test tells it (answer()).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.h"
#include "test_pki.h"

namespace zn::broker::test {

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The value of the first header named `name` (any case), or nullopt.
  std::optional<std::string> header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
    return std::nullopt;
  }
};

class HttpReceiver {
 public:
  // `dir` must outlive the receiver; `pki` set = HTTPS with its server certificate.
  explicit HttpReceiver(std::string dir, const std::optional<TestPki>& pki = std::nullopt)
      : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    std::vector<std::string> argv{"/usr/bin/python3", ZN_HTTP_RECEIVER, dir_};
    if (pki) {
      argv.push_back(pki->server_cert);
      argv.push_back(pki->server_key);
    }
    process_ = std::make_unique<ChildProcess>(argv, dir_ + "/receiver.out");
    const bool listening = eventually(
        [&] {
          std::ifstream in(dir_ + "/port");
          int port = 0;
          if (!(in >> port) || port <= 0) return false;
          port_ = static_cast<uint16_t>(port);
          return true;
        },
        std::chrono::seconds(15));
    if (!listening)
      throw std::runtime_error("http_receiver.py did not listen; see " + dir_ + "/receiver.out");
  }

  std::string url(const std::string& path, bool https = false) const {
    return std::string(https ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }

  // How the next requests are answered: {"status":503,"retry_after":"7"}, {"hang":30}, ...
  void answer(const nlohmann::json& how) const {
    const std::string tmp = dir_ + "/answer.json.tmp";
    std::ofstream(tmp) << how.dump();
    std::filesystem::rename(tmp, dir_ + "/answer.json");
  }

  // Every request recorded so far, in order.
  std::vector<ReceivedRequest> requests() const {
    std::vector<ReceivedRequest> out;
    for (int n = 1;; ++n) {
      const std::string base = dir_ + "/req-" + std::to_string(n);
      std::ifstream meta(base + ".json");
      if (!meta) return out;
      const auto record = nlohmann::json::parse(meta);
      ReceivedRequest request{record["method"], record["path"], {}, read(base + ".body")};
      for (const auto& h : record["headers"]) request.headers.emplace_back(h[0], h[1]);
      out.push_back(std::move(request));
    }
  }

 private:
  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  std::string dir_;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace zn::broker::test
