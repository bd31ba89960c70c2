// The signed command channel end to end (issue 15): the real zn-agent in a
// lab guest, zerod sealing commands under its key and reaching the agent
// over the one inward path the datapath keeps for it.
#include <sodium.h>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// A marked connection to the guest's agent port carrying `bytes`, as only a
// CAP_NET_ADMIN process can make; prints what came back (hex) or "failed".
constexpr const char* kRawAgent = R"py(import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
if sys.argv[4] == 'marked':
    s.setsockopt(socket.SOL_SOCKET, 36, 0x800)
s.bind((sys.argv[1], 0))
s.settimeout(3)
try:
    s.connect((sys.argv[2], int(sys.argv[3])))
    s.sendall(bytes.fromhex(sys.argv[5]))
    s.shutdown(socket.SHUT_WR)
    data = b''
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    print(data.decode(errors='replace'))
except Exception as e:
    print('failed', e, file=sys.stderr)
    print('failed')
)py";

class CommandTest : public ProxyTest {
 protected:
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(dir_ / "raw_agent.py") << kRawAgent;
    json s = call("session.show", {{"id", "user-1"}})["result"];
    const std::string a = s["network"]["address"];
    guest_ip_ = a.substr(0, a.find('/'));
    gateway_ip_ = s["network"]["gateway"];
  }
  void start_agent() {
    json k = call("command.key");
    ASSERT_TRUE(k["ok"]) << k.dump();
    servers_.push_back(
        spawn_in(lab_->guests()[0].netns, {ZN_AGENT_BIN, "--session", "user-1", "--key",
                                           k["result"]["public_key"], "--listen", "0.0.0.0:7070"}));
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = guest("nc -z -w 1 127.0.0.1 7070").exit_code == 0;
      if (!up) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(up) << "the agent never listened";
  }
  // command.exec, streamed: stdout, stderr and the last line.
  struct ExecReply {
    std::string out, err;
    json last;
  };
  ExecReply exec(const json& args) {
    ExecReply r;
    json a = args;
    a["id"] = "user-1";
    broker::control_stream(socket_, "command.exec", a, [&](const json& line) {
      if (line.contains("stream")) {
        std::string bytes(line["b64"].get<std::string>().size(), '\0');
        size_t len = 0;
        const std::string text = line["b64"];
        sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                          text.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL);
        bytes.resize(len);
        (line["stream"] == "stderr" ? r.err : r.out) += bytes;
        return true;
      }
      if (line.contains("ok")) return true;  // zerod's answer to the request itself
      r.last = line;
      return false;
    });
    return r;
  }
  std::string raw(const std::string& mode, const std::string& hex_bytes) {
    return run_in_netns(lab_->host_netns(), "python3 " + (dir_ / "raw_agent.py").string() + " " +
                                                gateway_ip_ + " " + guest_ip_ + " 7070 " + mode + " " +
                                                hex_bytes)
        .output;
  }
  std::string guest_ip_, gateway_ip_;
};

TEST_F(CommandTest, ACommandRunsInTheGuestAndOnlyZerodCanSendOne) {
  // No agent yet: zerod says so, and audits it.
  json ping = call("command.ping", {{"id", "user-1"}});
  EXPECT_FALSE(ping["ok"]) << ping.dump();
  start_agent();
  ping = call("command.ping", {{"id", "user-1"}});
  ASSERT_TRUE(ping["ok"]) << ping.dump();
  EXPECT_TRUE(ping["result"]["ran"]) << ping.dump();

  const ExecReply r =
      exec({{"argv",
             {"/bin/sh", "-c",
              "read x; echo \"got $x\"; echo to-err >&2; ip -4 -o addr show | grep -c 198.19.0.2; exit 7"}},
            {"stdin", "stdin-secret-4711\n"}});
  EXPECT_EQ(r.out, "got stdin-secret-4711\n1\n");
  EXPECT_EQ(r.err, "to-err\n");
  EXPECT_EQ(r.last["result"].value("exit_code", -1), 7) << r.last.dump();

  // Files in and out; the audit names the path, never the contents.
  const std::string data = "file-contents-0815";
  std::string b64(sodium_base64_ENCODED_LEN(data.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(b64.data(), b64.size(), reinterpret_cast<const unsigned char*>(data.data()), data.size(),
                    sodium_base64_VARIANT_ORIGINAL);
  b64.pop_back();
  const std::string path = (dir_ / "put.txt").string();  // the lab guest shares the host's files
  json put = call("command.put", {{"id", "user-1"}, {"path", path}, {"data_b64", b64}, {"mode", 0600}});
  ASSERT_TRUE(put["ok"]) << put.dump();
  EXPECT_EQ(slurp(path), data);
  json get = call("command.get", {{"id", "user-1"}, {"path", path}});
  ASSERT_TRUE(get["ok"]) << get.dump();
  EXPECT_EQ(get["result"]["data_b64"], b64);

  const std::string events = audit_events("command:", {"\"exit_code\":7", "put.txt\",\"type\":\"get\""});
  EXPECT_NE(events.find("command:reject"), std::string::npos) << events;
  EXPECT_NE(events.find("unreachable"), std::string::npos) << events;
  EXPECT_NE(events.find("command:run"), std::string::npos) << events;
  EXPECT_NE(events.find("\"exit_code\":7"), std::string::npos) << events;
  EXPECT_NE(events.find("\"argv\":[\"/bin/sh\""), std::string::npos) << events;
  EXPECT_EQ(events.find("stdin-secret-4711"), std::string::npos) << "stdin in the audit";
  EXPECT_EQ(events.find(data), std::string::npos) << "file contents in the audit";

  // The agent port is zerod's alone: unmarked, nothing from the host side
  // reaches it; marked (a root process), it reaches an agent that refuses
  // what zerod did not sign.
  // Dropped, not refused: the SYN never reaches the guest.
  EXPECT_NE(raw("unmarked", "5a4e4331").find("failed timed out"), std::string::npos);
  std::string forged = "5a4e43310102000675736572312d" + std::string(300, '0');
  const std::string refused = raw("marked", forged);
  EXPECT_NE(refused.find("bad_signature"), std::string::npos) << refused;
}

TEST_F(CommandTest, TheAgentPortCannotBeExposed) {
  json e = call("session.expose", {{"id", "user-1"}, {"port", 7070}, {"mode", "public"}});
  EXPECT_FALSE(e["ok"]) << e.dump();
  EXPECT_NE(e.dump().find("agent"), std::string::npos) << e.dump();
}

}  // namespace
}  // namespace zn::test
