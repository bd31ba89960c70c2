// The signed command channel end to end (issue 15): the real zn-agent in a
// lab guest, zerod sealing commands under its key and reaching the agent
// over the one inward path the datapath keeps for it.
#include <fcntl.h>
#include <sodium.h>
#include <sys/wait.h>

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

// A process that is not the agent, listening on the agent port: it reads
// the envelope and answers with a well-formed reply of its own, unsealed.
constexpr const char* kFakeAgent = R"py(import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', 7070))
s.listen(8)
def frame(kind, payload):
    return struct.pack('>BI', kind, len(payload)) + payload
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        while c.recv(65536):  # zerod half-closes after the envelope
            pass
        c.sendall(frame(1, b'forged-output\n') + frame(3, b'{"exit_code":0,"duration_ms":1}'))
    except Exception:
        pass
    c.close()
)py";

class CommandTest : public ProxyTest {
 protected:
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(dir_ / "raw_agent.py") << kRawAgent;
    std::ofstream(dir_ / "fake_agent.py") << kFakeAgent;
    json s = call("session.show", {{"id", "user-1"}})["result"];
    const std::string a = s["network"]["address"];
    guest_ip_ = a.substr(0, a.find('/'));
    gateway_ip_ = s["network"]["gateway"];
  }
  // The session's agent config, as `znctl agent provision` writes it.
  std::string provision(const std::string& name = "agent.conf") {
    json p = call("command.provision", {{"id", "user-1"}});
    EXPECT_TRUE(p["ok"]) << p.dump();
    const std::string path = (dir_ / name).string();
    ::unlink(path.c_str());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    const std::string text = p["result"].value("config", "");
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    return path;
  }
  // Starts `argv` in the guest and waits for the agent port to listen.
  pid_t start_listener(std::vector<std::string> argv) {
    const pid_t pid = spawn_in(lab_->guests()[0].netns, std::move(argv));
    servers_.push_back(pid);
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = guest("nc -z -w 1 127.0.0.1 7070").exit_code == 0;
      if (!up) std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(up) << "nothing listened on the agent port";
    return pid;
  }
  pid_t start_agent(const std::string& config = "") {
    return start_listener(
        {ZN_AGENT_BIN, "--config", config.empty() ? provision() : config, "--listen", "0.0.0.0:7070"});
  }
  void stop(pid_t pid) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
    std::erase(servers_, pid);
    for (int i = 0; i < 50 && guest("nc -z -w 1 127.0.0.1 7070").exit_code == 0; ++i)
      std::this_thread::sleep_for(100ms);
  }
  ExecReply exec(const json& args) {
    json a = args;
    a["id"] = "user-1";
    return command_exec(a);
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

TEST_F(CommandTest, AReplyThatIsNotTheSessionsAgentsIsRefused) {
  // A process of the guest answering on the agent port: its output never
  // reaches the operator, and the audit says why.
  const pid_t fake = start_listener({"python3", (dir_ / "fake_agent.py").string()});
  const ExecReply forged = exec({{"argv", {"/bin/true"}}});
  EXPECT_EQ(forged.out, "") << "a forged frame was relayed";
  EXPECT_NE(forged.last.value("error", "").find("not the agent's"), std::string::npos) << forged.last.dump();
  stop(fake);

  // A real agent with the wrong result key (one provisioned for another
  // session): it runs the command, but its reply does not open.
  std::string conf = slurp(provision("wrong.conf"));
  const size_t at = conf.find("ZN_RESULT_KEY=") + 14;
  conf.replace(at, 64, std::string(64, 'a'));
  { std::ofstream(dir_ / "wrong.conf", std::ios::trunc) << conf; }
  const pid_t wrong = start_agent((dir_ / "wrong.conf").string());
  const ExecReply unsealed = exec({{"argv", {"/bin/echo", "ran"}}});
  EXPECT_EQ(unsealed.out, "");
  EXPECT_NE(unsealed.last.value("error", "").find("not the agent's"), std::string::npos)
      << unsealed.last.dump();
  stop(wrong);

  // The positive control: the session's own agent on the same port.
  start_agent();
  const ExecReply honest = exec({{"argv", {"/bin/echo", "ran"}}});
  EXPECT_EQ(honest.out, "ran\n");
  EXPECT_EQ(honest.last["result"].value("exit_code", -1), 0) << honest.last.dump();
  const std::string events = audit_events("command:", {"\"argv\":[\"/bin/echo\",\"ran\"]"});
  size_t refusals = 0;
  for (size_t p = 0; (p = events.find("unauthenticated_reply", p)) != std::string::npos; ++p) ++refusals;
  EXPECT_EQ(refusals, 2u) << events;
}

TEST_F(CommandTest, ARotationRekeysTheAgentAndOneItMissedIsRekeyedOnItsNextCommand) {
  const std::string config = provision();
  pid_t agent = start_agent(config);
  const std::string first = call("command.key")["result"]["public_key"];
  json r = call("command.rotate");
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["result"]["rekeyed"], json::array({"user-1"})) << r.dump();
  const std::string second = r["result"]["public_key"];
  EXPECT_NE(second, first);
  EXPECT_EQ(call("command.key")["result"]["public_key"], second);
  EXPECT_EQ(exec({{"argv", {"/bin/echo", "after-rotation"}}}).out, "after-rotation\n");
  // The agent kept the key it was rotated to: restarted from its config,
  // it still takes zerod's commands.
  EXPECT_NE(slurp(config).find("ZN_COMMAND_KEY=" + second), std::string::npos) << slurp(config);
  stop(agent);

  // A rotation the agent misses: it still pins the key before.
  r = call("command.rotate");
  ASSERT_TRUE(r["ok"]) << r.dump();
  ASSERT_EQ(r["result"]["unreached"].size(), 1u) << r.dump();
  EXPECT_EQ(r["result"]["rekeyed"].size(), 0u) << r.dump();
  agent = start_agent(config);
  EXPECT_EQ(exec({{"argv", {"/bin/echo", "rekeyed-late"}}}).out, "rekeyed-late\n");
  EXPECT_NE(slurp(config).find("ZN_COMMAND_KEY=" + r["result"]["public_key"].get<std::string>()),
            std::string::npos);
  const std::string events = audit_events("command:", {"rekeyed-late"});
  EXPECT_NE(events.find("command:rotate"), std::string::npos) << events;
  EXPECT_NE(events.find("\"type\":\"rekey\""), std::string::npos) << events;
  // And an agent that pins a key zerod never had is not rekeyed by anyone.
  stop(agent);
  std::string conf = slurp(config);
  const size_t at = conf.find("ZN_COMMAND_KEY=") + 15;
  conf.replace(at, 64, std::string(64, '1'));
  std::ofstream(config, std::ios::trunc) << conf;
  start_agent(config);
  const ExecReply refused = exec({{"argv", {"/bin/true"}}});
  EXPECT_EQ(refused.last["reject"].value("reason", ""), "bad_signature") << refused.last.dump();
}

}  // namespace
}  // namespace zn::test
