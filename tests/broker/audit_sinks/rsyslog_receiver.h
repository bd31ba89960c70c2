// A real syslog receiver: rsyslogd in the foreground (-n) with its own config,
// pid file and work directory under a test's temp dir, imtcp on 127.0.0.1 and
// an ephemeral port (plain, or TLS through rsyslog-gnutls), and two files:
// raw.log with each message's MSG as received, fields.log with its header.
// Nothing else is loaded: no imuxsock, so /dev/log is never touched.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"
#include "test_pki.h"

namespace zn::broker::test {

class RsyslogReceiver {
 public:
  // `dir` must outlive the receiver; `pki` set = TLS.
  explicit RsyslogReceiver(std::string dir, std::optional<TestPki> pki = std::nullopt)
      : dir_(std::move(dir)), pki_(std::move(pki)) {
    ::mkdir(dir_.c_str(), 0700);
    ::mkdir((dir_ + "/work").c_str(), 0700);
  }

  // The first start takes an ephemeral port; a restart takes the same one.
  void start() {
    const std::string port_file = dir_ + "/port";
    ::unlink(port_file.c_str());
    write_config();
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/rsyslogd", "-n", "-f", dir_ + "/rsyslog.conf", "-i",
                                 dir_ + "/rsyslogd.pid"},
        dir_ + "/rsyslogd.out");
    // rsyslogd writes the port file only for port 0; a restart on the same
    // port is ready once it accepts a connection.
    const bool listening = eventually(
        [&] {
          if (port_ != 0) return accepts_connections();
          std::ifstream in(port_file);
          int port = 0;
          if (!(in >> port) || port <= 0) return false;
          port_ = static_cast<uint16_t>(port);
          return true;
        },
        std::chrono::seconds(15));
    if (!listening) throw std::runtime_error("rsyslogd did not listen; see " + dir_ + "/rsyslogd.out");
  }
  void stop() { process_.reset(); }
  void pause() { process_->signal(SIGSTOP); }
  void resume() { process_->signal(SIGCONT); }

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // MSG of every message received so far, in order.
  std::vector<std::string> messages() const { return lines_of(dir_ + "/raw.log"); }
  // "PRI|HOSTNAME|APP-NAME|MSGID" of every message received so far.
  std::vector<std::string> headers() const { return lines_of(dir_ + "/fields.log"); }
  bool wait_for_messages(size_t count, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    return eventually([&] { return messages().size() >= count && headers().size() >= count; }, timeout);
  }

 private:
  bool accepts_connections() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port_);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    return connected;
  }

  // Whole lines only: rsyslogd may be half way through writing the last one.
  static std::vector<std::string> lines_of(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> out;
    for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      out.push_back(text.substr(start, end - start));
    return out;
  }

  void write_config() const {
    std::ostringstream conf;
    conf << "global(workDirectory=\"" << dir_ << "/work\" maxMessageSize=\"512k\"";
    if (pki_)
      conf << " DefaultNetstreamDriverCAFile=\"" << pki_->ca_cert << "\" DefaultNetstreamDriverCertFile=\""
           << pki_->server_cert << "\" DefaultNetstreamDriverKeyFile=\"" << pki_->server_key << "\"";
    conf << ")\n";
    if (pki_)
      conf << "module(load=\"imtcp\" StreamDriver.Name=\"gtls\" StreamDriver.Mode=\"1\" "
              "StreamDriver.Authmode=\"anon\")\n";
    else
      conf << "module(load=\"imtcp\")\n";
    conf << "template(name=\"raw\" type=\"string\" string=\"%msg%\\n\")\n"
         << "template(name=\"fields\" type=\"string\" string=\"%pri%|%hostname%|%app-name%|%msgid%\\n\")\n"
         << "ruleset(name=\"zn\") {\n"
         << "  action(type=\"omfile\" file=\"" << dir_ << "/raw.log\" template=\"raw\")\n"
         << "  action(type=\"omfile\" file=\"" << dir_ << "/fields.log\" template=\"fields\")\n"
         << "}\n"
         << "input(type=\"imtcp\" address=\"127.0.0.1\" port=\"" << port_ << "\" listenPortFileName=\""
         << dir_ << "/port\" ruleset=\"zn\")\n";
    std::ofstream(dir_ + "/rsyslog.conf") << conf.str();
  }

  std::string dir_;
  std::optional<TestPki> pki_;
  uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace zn::broker::test
