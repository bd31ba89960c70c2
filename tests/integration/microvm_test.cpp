// Real microVMs on governed TAPs (issue 14): the tiny guest image
// (scripts/build-guest.sh: Debian's cloud kernel, busybox, curl) booted by
// zerod under QEMU on a session's TAP, and what runs inside it governed
// exactly as a lab guest is:
//   - DNS for an allowed name answers, a denied one does not;
//   - HTTPS allowed through the proxy with the identity injected upstream,
//     a denied request 403;
//   - UDP and ICMP dropped, with packet:deny events naming the session;
//   - no secret in the VM's environment or files;
//   - a second VM cannot reach the first (with a positive control: the
//     first answers what is allowed);
//   - deleting the session leaves no process, TAP, directory or cgroup.
//   - a VM's disk is an overlay of its own on a base it never writes: what
//     it writes lands in the overlay, encrypted unless asked otherwise (a
//     copied overlay shows none of it), and goes with the VM;
//   - `znctl vm console --follow` streams the console until the VM exits.
// The VMs run the script given as user-data and print between markers on
// their serial console, which the test reads through `vm.console`.
#include <sys/stat.h>

#include <cstdio>
#include <future>
#include <optional>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

const std::string kGuestDir = ZN_GUEST_DIR;

class MicroVmTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    // The accel probe's verdicts, kept for this test's zerod only.
    config["vm_cache_dir"] = (dir_ / "vmcache").string();
  }
  void SetUp() override {
    for (const char* f : {"vmlinuz", "initramfs.cpio.gz"})
      ASSERT_TRUE(fs::exists(fs::path(kGuestDir) / f))
          << kGuestDir << "/" << f << " is missing: scripts/build-guest.sh " << kGuestDir;
    ProxyTest::SetUp();
  }
  void TearDown() override {
    for (const char* id : {"vm-1", "vm-2"}) call("session.delete", {{"id", id}});
    ProxyTest::TearDown();
  }
  // A session on a TAP zerod creates (nothing else attached to it).
  void create_vm_session(const std::string& id, unsigned slot, const std::string& policy_text) {
    json r = call("session.create", {{"id", id}, {"policy", policy_text}, {"slot", slot}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }
  json run_vm(const std::string& id, const std::string& user_data) {
    return call("vm.run", {{"session", id},
                           {"kernel", kGuestDir + "/vmlinuz"},
                           {"initrd", kGuestDir + "/initramfs.cpio.gz"},
                           {"memory_mib", 256},
                           {"user_data", user_data}});
  }
  // Whether a VM's cgroup ("zeroness/<name>", from vm.list) is on the host,
  // in any hierarchy (cgroup v1's memory and pids, or v2's).
  static bool cgroup_exists(const std::string& cgroup) {
    for (const char* controller : {"memory", "pids", ""})
      if (fs::exists(fs::path("/sys/fs/cgroup") / controller / cgroup)) return true;
    return false;
  }
  // The user-data's output once it has run (TCG boots in seconds; a loaded
  // CI machine is given two minutes).
  std::string user_data_output(const std::string& id) {
    std::string console;
    for (int i = 0; i < 1200; ++i) {
      json r = call("vm.console", {{"session", id}});
      console = r["result"].value("console", "");
      if (console.find("ZN-USER-DATA-END") != std::string::npos) break;
      std::this_thread::sleep_for(100ms);
    }
    const size_t begin = console.find("ZN-USER-DATA-BEGIN");
    EXPECT_NE(begin, std::string::npos) << console;
    EXPECT_NE(console.find("ZN-USER-DATA-END"), std::string::npos) << console;
    return begin == std::string::npos ? console : console.substr(begin);
  }
};

TEST_F(MicroVmTest, AVmIsGovernedLikeALabGuest) {
  create_vm_session("vm-1", 5, policy());
  json r = run_vm("vm-1", R"sh(
echo "dns-allowed: $(nslookup api.github.com 2>&1 | grep -c 198.18.0.10)"
echo "dns-denied: $(nslookup evil.example 2>&1 | grep -c 198.18.0.66)"
echo "https-allowed: $(curl -s -m 10 -o /dev/null -w '%{http_code}' https://api.github.com/repos/x)"
echo "https-denied: $(curl -s -m 10 -o /dev/null -w '%{http_code}' -X DELETE https://api.github.com/repos/x)"
echo "https-identity: $(curl -s -m 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer guest-own' https://api.stripe.com/v1/charges)"
ping -c 1 -W 2 198.18.0.10 > /dev/null 2>&1 && echo "icmp: through" || echo "icmp: dropped"
curl -s -m 2 tftp://198.18.0.10/probe > /dev/null 2>&1; echo "udp: sent"
echo "env-secrets: $(env | grep -c sk_live)"
echo "file-secrets: $(grep -rls sk_live / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | wc -l)"
echo "ca: $(grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt)"
)sh");
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["result"]["backend"], "qemu");
  const std::string out = user_data_output("vm-1");
  for (const char* line :
       {"dns-allowed: 1", "dns-denied: 0", "https-allowed: 200", "https-denied: 403", "https-identity: 200",
        "icmp: dropped", "udp: sent", "env-secrets: 0", "file-secrets: 0", "ca: 1", "ZN-USER-DATA-END rc=0"})
    EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;
  // The identity reached the upstream; the guest's own token did not.
  const std::string upstream = upstream_log();
  EXPECT_NE(upstream.find(std::string("Bearer ") + kSecret), std::string::npos) << upstream;
  EXPECT_EQ(upstream.find("guest-own"), std::string::npos) << upstream;
  // Audited under the VM's session.
  const std::string dns = audit_events("dns:", {"evil.example"});
  EXPECT_NE(dns.find("api.github.com"), std::string::npos) << dns;
  const std::string packets = audit_events("packet:deny", {"icmp", "udp"});
  EXPECT_NE(packets.find("icmp"), std::string::npos) << packets;
  EXPECT_NE(packets.find("udp"), std::string::npos) << packets;
  // The VMM runs as the VM's own uid, not root.
  json list = call("vm.list")["result"];
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_NE(list[0]["uid"].get<unsigned>(), 0u);
  const std::string status = slurp("/proc/" + std::to_string(list[0]["pid"].get<int>()) + "/status");
  EXPECT_NE(status.find("Uid:\t" + std::to_string(list[0]["uid"].get<unsigned>())), std::string::npos)
      << status;
  EXPECT_NE(status.find("CapEff:\t0000000000000000"), std::string::npos) << status;
  // The accelerator the probe found is remembered for this binary, kernel and image.
  const std::string verdicts = slurp(dir_ / "vmcache" / "qemu-accel");
  EXPECT_EQ(verdicts.rfind(list[0]["accel"].get<std::string>() + " ", 0), 0u) << verdicts;
  EXPECT_NE(verdicts.find("initramfs.cpio.gz"), std::string::npos) << verdicts;
}

TEST_F(MicroVmTest, AVmCannotReachAnotherAndLeavesNothingBehind) {
  create_vm_session("vm-1", 5, policy());
  create_vm_session("vm-2", 6, policy());
  // The first serves on 8080 and 80 (and reaches itself: the positive
  // control for its servers); the second tries it, and reaches what its
  // policy allows (the positive control for its network).
  ASSERT_TRUE(run_vm("vm-1", R"sh(
mkdir -p /www && echo hello > /www/index.html
httpd -p 8080 -h /www && httpd -p 80 -h /www
echo "self: $(curl -s -m 3 http://127.0.0.1:8080/)"
)sh")["ok"]);
  EXPECT_NE(user_data_output("vm-1").find("self: hello"), std::string::npos);
  ASSERT_TRUE(run_vm("vm-2", R"sh(
echo "peer-8080: $(curl -s -m 5 http://198.19.5.2:8080/ | grep -c hello)"
echo "peer-80: $(curl -s -m 5 http://198.19.5.2/ | grep -c hello)"
ping -c 1 -W 2 198.19.5.2 > /dev/null 2>&1 && echo "peer-icmp: through" || echo "peer-icmp: dropped"
echo "allowed: $(curl -s -m 10 -o /dev/null -w '%{http_code}' https://api.github.com/repos/x)"
)sh")["ok"]);
  const std::string out = user_data_output("vm-2");
  for (const char* line : {"peer-8080: 0", "peer-80: 0", "peer-icmp: dropped", "allowed: 200"})
    EXPECT_NE(out.find(line), std::string::npos) << line << " in\n" << out;

  json list = call("vm.list")["result"];
  ASSERT_EQ(list.size(), 2u) << list.dump();
  const json& first = list[0]["session"] == "vm-1" ? list[0] : list[1];
  const int pid = first["pid"];
  EXPECT_NE(list[0]["uid"], list[1]["uid"]);  // one uid per VM
  const std::string cgroup = first["cgroup"];
  EXPECT_TRUE(cgroup_exists(cgroup)) << cgroup;
  ASSERT_TRUE(call("session.delete", {{"id", "vm-1"}})["ok"]);
  EXPECT_FALSE(fs::exists("/proc/" + std::to_string(pid) + "/status"));
  EXPECT_FALSE(fs::exists(dir_ / "state" / "vms" / "vm-1"));
  EXPECT_FALSE(cgroup_exists(cgroup)) << cgroup;
  EXPECT_NE(run_in_netns(lab_->host_netns(), "ip link show zn-tap5").exit_code, 0);
  EXPECT_EQ(call("vm.list")["result"].size(), 1u);
  // Stopped through znctl's verb, the other goes the same way.
  ASSERT_TRUE(call("vm.stop", {{"session", "vm-2"}})["ok"]);
  EXPECT_FALSE(fs::exists(dir_ / "state" / "vms" / "vm-2"));
  EXPECT_TRUE(call("vm.list")["result"].empty());
}

// A VM's declared port, from the host side: a ticket once, and nothing else.
TEST_F(MicroVmTest, ADeclaredPortOfAVmAnswersATicketOnce) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", R"sh(
mkdir -p /www && echo hello-from-the-vm > /www/index.html
httpd -p 8080 -h /www && echo "httpd: up"
)sh")["ok"]);
  ASSERT_NE(user_data_output("vm-1").find("httpd: up"), std::string::npos);
  json e = call("session.expose", {{"id", "vm-1"}, {"port", 8080}});
  ASSERT_TRUE(e["ok"]) << e.dump();
  const std::string listen = e["result"]["listen"];
  auto get = [&](const std::string& flags) {
    return run_in_netns(lab_->host_netns(), "curl -s -m 10 -w ' status=%{http_code}' " + flags + " http://" +
                                                listen + "/index.html")
        .output;
  };
  std::string r = get("");
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  json t = call("session.ticket", {{"id", "vm-1"}, {"port", 8080}});
  ASSERT_TRUE(t["ok"]) << t.dump();
  const std::string header = "-H 'Zn-Ticket: " + t["result"]["ticket"].get<std::string>() + "'";
  r = get(header);
  EXPECT_NE(r.find("hello-from-the-vm"), std::string::npos) << r;
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  r = get(header);
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  EXPECT_EQ(r.find("hello-from-the-vm"), std::string::npos) << r;
}

// A marked connection from the gateway address, as zerod's to an agent port
// would be (only a CAP_NET_ADMIN process can make one): prints the first
// bytes that came back, or "failed".
constexpr const char* kVmMarkedConnect = R"py(import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, 36, 0x800)
s.bind((sys.argv[1], 0))
s.settimeout(5)
try:
    s.connect((sys.argv[2], int(sys.argv[3])))
    s.sendall(b'GET / HTTP/1.0\r\n\r\n')
    print(s.recv(64).decode(errors='replace').split('\r\n')[0])
except Exception as e:
    print('failed', e)
)py";

// The command channel in a real VM (issue 15): the agent /init starts from
// the config zerod put in the VM's boot archive is reached over virtio-serial
// (QEMU's UNIX sockets in the VM's directory), runs commands as the
// workload's uid, which can neither read the agent's key, open its ports,
// signal it, nor reach zerod's control socket; the datapath admits nothing
// to the agent port of a VM (there is no TCP path to forge); zerod's
// rotation reaches it.
TEST_F(MicroVmTest, ACommandRunsInAVmOverVirtioSerialAndTheWorkloadCannotForgeTheAgentsReplies) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", "echo up\n")["ok"]);
  ASSERT_NE(user_data_output("vm-1").find("up"), std::string::npos);
  auto exec = [&](const std::string& script, std::optional<unsigned> uid = std::nullopt) {
    json a = {{"id", "vm-1"}, {"argv", {"/bin/sh", "-c", script}}, {"timeout_ms", 20000}};
    if (uid) a["uid"] = *uid;
    return command_exec(a);
  };
  // Commands run as the workload (zn, 1000) unless they name a uid.
  ExecReply r = exec("id -u; echo $((6 * 7)) >&2; exit 3");
  EXPECT_EQ(r.out, "1000\n") << r.last.dump();
  EXPECT_EQ(r.err, "42\n");
  EXPECT_EQ(r.last["result"].value("exit_code", -1), 3) << r.last.dump();
  EXPECT_EQ(exec("id -u", 0u).out, "0\n");
  // The positive control for what follows: root in the guest sees the
  // agent's config, its process and its ports, and the agent holds them.
  EXPECT_EQ(
      exec("test -s /run/zn-agent/agent.conf && pidof zn-agent >/dev/null && echo seen;"
           "for n in /sys/class/virtio-ports/*/name; do cat $n; done;"
           "ls -l /proc/$(pidof zn-agent)/fd | grep -c /dev/vport",
           0u)
          .out,
      "seen\norg.zeroness.agent.0\norg.zeroness.agent.1\norg.zeroness.agent.2\norg.zeroness.agent.3\n4\n");
  r = exec(
      "test -e /zn/agent.conf && echo boot-copy-left;"
      "cat /run/zn-agent/agent.conf >/dev/null 2>&1 && echo key-read;"
      "ls /run/zn-agent >/dev/null 2>&1 && echo dir-listed;"
      "kill -9 $(pidof zn-agent) 2>/dev/null && echo agent-killed;"
      "cat /proc/$(pidof zn-agent)/environ >/dev/null 2>&1 && echo agent-environ-read;"
      "for p in /dev/vport*; do echo x 2>/dev/null >$p && echo port-written; cat $p >/dev/null 2>&1 && "
      "echo port-read; done;"
      // Nothing listens on the agent port: the agent is not on the network.
      "timeout 1 nc -l -p 7070 </dev/null >/dev/null 2>&1; [ $? -ge 124 ] && echo agent-port-free;"
      "test -e " +
      socket_ +
      " && echo control-socket-visible;"
      "echo done");
  EXPECT_EQ(r.out, "agent-port-free\ndone\n") << r.err;
  // Not even root can take a port the agent holds (one opener each).
  EXPECT_EQ(exec("echo x 2>/dev/null >/dev/vport1p1 && echo port-taken; echo done", 0u).out, "done\n");

  // The datapath admits nothing to the VM's agent port, not even zerod's
  // marked connection from the gateway: a workload listening there is
  // never reached. The positive control: the same connection to a declared
  // port is let through.
  exec(
      "mkdir -p /tmp/www && echo hi > /tmp/www/index.html && httpd -p 7070 -h /tmp/www && "
      "httpd -p 8080 -h /tmp/www && echo listening");
  ASSERT_TRUE(call("session.expose", {{"id", "vm-1"}, {"port", 8080}})["ok"]);
  json show = call("session.show", {{"id", "vm-1"}})["result"];
  const std::string address = show["network"]["address"];
  const std::string guest = address.substr(0, address.find('/'));
  const std::string gateway = show["network"]["gateway"];
  std::ofstream(dir_ / "marked_connect.py") << kVmMarkedConnect;
  auto marked = [&](int port) {
    return run_in_netns(lab_->host_netns(), "python3 " + (dir_ / "marked_connect.py").string() + " " +
                                                gateway + " " + guest + " " + std::to_string(port))
        .output;
  };
  EXPECT_NE(marked(8080).find(" 200 OK"), std::string::npos) << marked(8080);
  EXPECT_NE(marked(7070).find("failed"), std::string::npos) << marked(7070);

  // The agent survived all of it: the next command still runs, sealed.
  EXPECT_EQ(exec("echo alive").out, "alive\n");
  // Commands at once, each on a channel of its own.
  std::vector<std::future<ExecReply>> at_once;
  for (int i = 0; i < 4; ++i)
    at_once.push_back(std::async(std::launch::async,
                                 [&, i] { return exec("sleep 1; echo at-once-" + std::to_string(i)); }));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at_once[i].get().out, "at-once-" + std::to_string(i) + "\n");
  // A rotation rekeys it.
  json rot = call("command.rotate");
  ASSERT_TRUE(rot["ok"]) << rot.dump();
  bool rekeyed = false;
  for (const auto& id : rot["result"]["rekeyed"]) rekeyed = rekeyed || id == "vm-1";
  EXPECT_TRUE(rekeyed) << rot.dump();
  EXPECT_EQ(exec("echo after-rotation").out, "after-rotation\n");
  const std::string events = audit_events("command:", {"after-rotation"});
  EXPECT_EQ(events.find("unauthenticated_reply"), std::string::npos) << events;
}

// An exec whose client goes away mid-run is ended in the VM, and the channel
// it used serves the next command at once (no stale frame reaches it).
TEST_F(MicroVmTest, AnAbandonedCommandFreesItsChannel) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", "echo up\n")["ok"]);
  ASSERT_NE(user_data_output("vm-1").find("up"), std::string::npos);
  // Streams output for 20 s unless stopped; the client reads a line and goes.
  const std::string marker = "/tmp/abandoned-ran-on";
  const std::string cmd =
      "timeout 10 " + std::string(ZN_ZNCTL_BIN) + " --socket " + socket_ +
      " exec vm-1 -- /bin/sh -c 'for i in $(seq 1 200); do echo tick $i; sleep 0.1; done; "
      "touch " +
      marker + "' </dev/null 2>&1 | head -n 1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[256] = {};
  const std::string first = std::fgets(line, sizeof line, p) ? line : "";
  ::pclose(p);
  EXPECT_EQ(first, "tick 1\n");
  for (int i = 0; i < 8; ++i) {
    ExecReply r = command_exec({{"id", "vm-1"}, {"argv", {"/bin/echo", "next-" + std::to_string(i)}}});
    EXPECT_EQ(r.out, "next-" + std::to_string(i) + "\n") << r.last.dump();
  }
  std::this_thread::sleep_for(22s);
  ExecReply left =
      command_exec({{"id", "vm-1"}, {"argv", {"/bin/sh", "-c", "test -e " + marker + " && echo ran-on"}}});
  EXPECT_EQ(left.out, "") << "the abandoned command was not ended";
  const std::string events = audit_events("command:", {"next-7"});
  EXPECT_NE(events.find("client_gone"), std::string::npos) << events;
  EXPECT_EQ(events.find("unauthenticated_reply"), std::string::npos) << events;
}

// Commands back to back on every channel at once: each connection's close
// reaches the guest as a control message that can arrive after the next
// connection's envelope, so the agent must not take it for a cancel (nor
// give up writing its reply while the host reconnects).
TEST_F(MicroVmTest, CommandsBackToBackOnEveryChannelAllAnswer) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", "echo up\n")["ok"]);
  ASSERT_NE(user_data_output("vm-1").find("up"), std::string::npos);
  constexpr int kThreads = 4, kEach = 40;
  std::vector<std::future<std::vector<std::string>>> workers;
  for (int t = 0; t < kThreads; ++t)
    workers.push_back(std::async(std::launch::async, [&, t] {
      std::vector<std::string> wrong;
      for (int i = 0; i < kEach; ++i) {
        const std::string word = "b2b-" + std::to_string(t) + "-" + std::to_string(i);
        ExecReply r = command_exec({{"id", "vm-1"}, {"argv", {"/bin/echo", word}}});
        if (r.out != word + "\n") wrong.push_back(word + ": " + r.last.dump());
      }
      return wrong;
    }));
  for (auto& w : workers)
    for (const std::string& e : w.get()) ADD_FAILURE() << e;
  const std::string events = audit_events("command:", {"b2b-3-39"});
  EXPECT_EQ(events.find("command:reject"), std::string::npos) << events;
}

// Bytes on a VM's agent channel straight from the host (root can connect to
// QEMU's socket as zerod does), from a file: what comes back within two
// seconds, hex.
constexpr const char* kChannelBytes = R"py(import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(open(sys.argv[2], 'rb').read())
s.settimeout(0.2)
data, until = b'', time.time() + 2
while time.time() < until:
    try:
        chunk = s.recv(4096)
    except socket.timeout:
        continue
    if not chunk:
        break
    data += chunk
print(data.hex() or 'nothing')
)py";

// Whatever reaches a channel besides zerod's envelopes (junk, half an
// envelope, an envelope zerod did not sign) is refused or dropped, and
// leaves nothing behind for the commands that follow on that channel; an
// agent that answers nothing is reported unreachable within the accept
// bound, not after an exec's hour.
TEST_F(MicroVmTest, AChannelRecoversFromJunkAndAnAgentThatIsGoneIsSaidToBe) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", "echo up\n")["ok"]);
  ASSERT_NE(user_data_output("vm-1").find("up"), std::string::npos);
  std::ofstream(dir_ / "channel_bytes.py") << kChannelBytes;
  const fs::path vm = dir_ / "state" / "vms" / "vm-1";
  auto hex_of = [](const std::string& bytes) {
    std::string hex;
    for (unsigned char c : bytes) {
      hex += "0123456789abcdef"[c >> 4];
      hex += "0123456789abcdef"[c & 15];
    }
    return hex;
  };
  auto send = [&](int channel, const std::string& bytes) {
    std::ofstream(dir_ / "channel.in", std::ios::binary) << bytes;
    return run_in_netns(lab_->host_netns(),
                        "python3 " + (dir_ / "channel_bytes.py").string() + " " +
                            (vm / ("agent-" + std::to_string(channel) + ".sock")).string() + " " +
                            (dir_ / "channel.in").string())
        .output;
  };
  const std::string sync_hex = hex_of("ZN-REPLY");
  // Junk is refused (a sealed rejection after the sync mark); an envelope
  // cut short is refused once the host side closes; nothing of either runs.
  EXPECT_NE(send(0, "GET / HTTP/1.1\r\nHost: agent\r\n\r\n").find(sync_hex), std::string::npos);
  EXPECT_NE(send(1, std::string("ZNC1\x01\x01\x00\x04vm-1", 12)).find("nothing"), std::string::npos);
  EXPECT_NE(send(2, std::string(100000, 'x')).find(sync_hex), std::string::npos);
  // The positive control, on every channel at once: zerod's commands run.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<ExecReply>> at_once;
    for (int i = 0; i < 4; ++i)
      at_once.push_back(std::async(std::launch::async, [&, i] {
        return command_exec({{"id", "vm-1"}, {"argv", {"/bin/echo", "clean-" + std::to_string(i)}}});
      }));
    for (int i = 0; i < 4; ++i) {
      const ExecReply r = at_once[i].get();
      EXPECT_EQ(r.out, "clean-" + std::to_string(i) + "\n") << r.last.dump();
    }
  }
  std::string events = audit_events("command:", {"clean-3"});
  EXPECT_EQ(events.find("command:reject"), std::string::npos) << events;

  // The agent stopped (root in the guest can): the next command is refused
  // as unreachable within the accept bound.
  command_exec({{"id", "vm-1"},
                {"uid", 0},
                {"argv", {"/bin/sh", "-c", "(sleep 1; kill -STOP $(pidof zn-agent)) >/dev/null 2>&1 &"}}});
  std::this_thread::sleep_for(2s);
  const auto start = std::chrono::steady_clock::now();
  const ExecReply gone = command_exec({{"id", "vm-1"}, {"argv", {"/bin/echo", "unseen"}}});
  EXPECT_EQ(gone.out, "");
  EXPECT_NE(gone.last.dump().find("no agent answered"), std::string::npos) << gone.last.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  events = audit_events("command:reject", {"unseen"});
  EXPECT_NE(events.find("unreachable"), std::string::npos) << events;
}

// zerod killed outright: its VMs die with it (they never run unwatched), and
// the next zerod removes what they left.
TEST_F(MicroVmTest, AVmDiesWithZerodAndItsRemainsAreSweptAtStart) {
  create_vm_session("vm-1", 5, policy());
  ASSERT_TRUE(run_vm("vm-1", "echo up\n")["ok"]);
  json list = call("vm.list")["result"];
  ASSERT_EQ(list.size(), 1u);
  const std::string proc = "/proc/" + std::to_string(list[0]["pid"].get<int>());
  const std::string cgroup = list[0]["cgroup"];
  ASSERT_TRUE(fs::exists(proc));
  stop_zerod(SIGKILL);
  for (int i = 0; i < 100 && fs::exists(proc); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(fs::exists(proc)) << "the VM outlived zerod";
  // What the sweep is for.
  EXPECT_TRUE(fs::exists(dir_ / "state" / "vms" / "vm-1"));
  EXPECT_TRUE(cgroup_exists(cgroup)) << cgroup;
  start_zerod();
  EXPECT_FALSE(fs::exists(dir_ / "state" / "vms" / "vm-1"));
  EXPECT_FALSE(cgroup_exists(cgroup)) << cgroup;
  EXPECT_TRUE(call("vm.list")["result"].empty());
  // The session itself was restored, and runs a VM again.
  ASSERT_TRUE(run_vm("vm-1", "echo again\n")["ok"]);
  EXPECT_NE(user_data_output("vm-1").find("again"), std::string::npos);
}

// The disk tests pin TCG: what they test does not depend on the
// accelerator, and no KVM probe boot is spent on it.
class MicroVmDiskTest : public MicroVmTest {
 protected:
  void configure(json& config) override {
    MicroVmTest::configure(config);
    config["vm_accel"] = "tcg";
  }
  void SetUp() override {
    MicroVmTest::SetUp();
    // A 16 MiB ext4 base holding a marker file.
    const fs::path src = dir_ / "disk-src";
    fs::create_directories(src);
    std::ofstream(src / "hello.txt") << "ZN-DISK-MARKER-ONE\n";
    base_ = (dir_ / "base.img").string();
    const std::string mkfs = "mkfs.ext4 -q -F -d " + src.string() + " " + base_ + " 16M >/dev/null 2>&1";
    ASSERT_EQ(std::system(mkfs.c_str()), 0) << mkfs;
  }
  // Reads the marker from the base, writes well over a cluster of a second
  // one, and powers off (the guest unmounts the disk first).
  json run_disk_vm(const std::string& id, bool encrypt) {
    return call("vm.run", {{"session", id},
                           {"kernel", kGuestDir + "/vmlinuz"},
                           {"initrd", kGuestDir + "/initramfs.cpio.gz"},
                           {"memory_mib", 256},
                           {"disk", base_},
                           {"encrypt", encrypt},
                           {"poweroff", true},
                           {"user_data", R"sh(
echo "read: $(cat /mnt/disk/hello.txt)"
yes ZN-DISK-MARKER-TWO-0123456789abcdef | head -n 8192 > /mnt/disk/written.txt
sync
echo "wrote: $(wc -l < /mnt/disk/written.txt) lines"
printf 'bytes: \377 \316\273\n'
)sh"}});
  }
  void wait_exited(const std::string& id) {
    for (int i = 0; i < 1200; ++i) {
      const json list = call("vm.list")["result"];
      for (const json& v : list)
        if (v["session"] == id && v["state"] == "exited") return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << id << " did not power off";
  }
  fs::path vm_dir(const std::string& id) const { return dir_ / "state" / "vms" / id; }
  std::string base_;
};

TEST_F(MicroVmDiskTest, AnEncryptedOverlayHidesWhatTheVmWrote) {
  create_vm_session("vm-1", 5, policy());
  const std::string base_before = slurp(base_);
  ASSERT_EQ(base_before.size(), 16u << 20);
  json r = run_disk_vm("vm-1", true);
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["result"]["disk"], (json{{"base", base_}, {"encrypted", true}}));
  // The key reaches QEMU through a pipe: its command line names the pipe
  // only. (Read once QEMU runs: the pid is zerod's fork until it execs.)
  const std::string proc = "/proc/" + std::to_string(r["result"]["pid"].get<int>());
  std::string cmdline;
  for (int i = 0; i < 200 && cmdline.find("qemu") == std::string::npos; ++i) {
    std::this_thread::sleep_for(10ms);
    cmdline = slurp(proc + "/cmdline");
  }
  EXPECT_NE(cmdline.find("secret,id=zn-disk-key,file=/proc/self/fd/5"), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find("data="), std::string::npos) << cmdline;
  EXPECT_EQ(cmdline.find(base_), std::string::npos) << cmdline;  // the base comes as a descriptor

  // Followed from the start: znctl ends by itself when the VM has powered
  // off, having printed the console whole.
  const std::string follow =
      "timeout 120 " + std::string(ZN_ZNCTL_BIN) + " --socket " + socket_ + " vm console vm-1 --follow 2>&1";
  FILE* z = ::popen(follow.c_str(), "r");
  ASSERT_NE(z, nullptr);
  std::string followed;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, z)) > 0;) followed.append(buf, n);
  EXPECT_EQ(::pclose(z), 0) << followed;
  wait_exited("vm-1");
  const fs::path dir = vm_dir("vm-1");
  const std::string console = slurp(dir / "console.log");
  // What the guest printed, as JSON carries it: a byte that is not UTF-8
  // (\377) is U+FFFD, a whole sequence (λ) is itself.
  const json tail = call("vm.console", {{"session", "vm-1"}});
  ASSERT_TRUE(tail["ok"]) << tail.dump();
  EXPECT_EQ(followed, tail["result"]["console"].get<std::string>()) << "qemu.log:\n"
                                                                    << slurp(dir / "qemu.log");
  const size_t lambda = console.find("\xce\xbb");
  ASSERT_NE(lambda, std::string::npos) << console;
  EXPECT_NE(console.find("bytes: \xff "), std::string::npos) << console;
  EXPECT_NE(followed.find("bytes: \xef\xbf\xbd \xce\xbb"), std::string::npos) << followed;
  // Offsets count the console's bytes: a chunk from inside, a cut sequence
  // given as it is once the VM has gone, the end, and past it.
  const auto chunk = [&](uint64_t offset, uint32_t bytes) {
    return call("vm.console", {{"session", "vm-1"}, {"offset", offset}, {"bytes", bytes}})["result"];
  };
  json c = chunk(lambda - 7, 4);
  EXPECT_EQ(c["console"], console.substr(lambda - 7, 4));
  EXPECT_EQ(c["offset"], lambda - 3);
  EXPECT_EQ(c["running"], false);
  c = chunk(lambda, 1);
  EXPECT_EQ(c["console"], "\xef\xbf\xbd");
  EXPECT_EQ(c["offset"], lambda + 1);
  EXPECT_EQ(chunk(console.size(), 100)["console"], "");
  EXPECT_EQ(chunk(console.size() + 50, 100)["offset"], console.size());
  for (const char* line :
       {"read: ZN-DISK-MARKER-ONE", "wrote: 8192 lines", "ZN-USER-DATA-END rc=0", "/dev/vda mounted"})
    EXPECT_NE(console.find(line), std::string::npos) << line << " in\n" << console;
  EXPECT_EQ(console.find("ZN-DISK-FAILED"), std::string::npos) << console;

  // The base is as it was; the overlay is LUKS, the VM's own, and shows
  // nothing of what was written, nor the qcow2 inside it.
  EXPECT_TRUE(slurp(base_) == base_before) << "the base was written";
  const fs::path overlay = dir / "overlay.luks";
  const std::string bytes = slurp(overlay);
  EXPECT_EQ(bytes.rfind(std::string("LUKS\xba\xbe", 6), 0), 0u);
  EXPECT_EQ(bytes.find("ZN-DISK-MARKER-TWO"), std::string::npos);
  EXPECT_EQ(bytes.find("QFI\xfb"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat(overlay.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, r["result"]["uid"].get<unsigned>());

  ASSERT_TRUE(call("vm.stop", {{"session", "vm-1"}})["ok"]);
  EXPECT_FALSE(fs::exists(overlay));
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_TRUE(slurp(base_) == base_before);
}

// The positive control: the same writes, unencrypted, are in the overlay's
// bytes. Deleting the session takes the overlay.
TEST_F(MicroVmDiskTest, APlainOverlayHoldsWhatTheVmWrote) {
  create_vm_session("vm-1", 5, policy());
  const std::string base_before = slurp(base_);
  json r = run_disk_vm("vm-1", false);
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["result"]["disk"], (json{{"base", base_}, {"encrypted", false}}));
  const std::string out = user_data_output("vm-1");
  EXPECT_NE(out.find("read: ZN-DISK-MARKER-ONE"), std::string::npos) << out;
  EXPECT_NE(out.find("wrote: 8192 lines"), std::string::npos) << out;
  wait_exited("vm-1");
  const fs::path overlay = vm_dir("vm-1") / "overlay.qcow2";
  const std::string bytes = slurp(overlay);
  EXPECT_EQ(bytes.rfind("QFI\xfb", 0), 0u);
  EXPECT_NE(bytes.find("ZN-DISK-MARKER-TWO-0123456789abcdef\nZN-DISK-MARKER-TWO"), std::string::npos);
  EXPECT_TRUE(slurp(base_) == base_before) << "the base was written";
  ASSERT_TRUE(call("session.delete", {{"id", "vm-1"}})["ok"]);
  EXPECT_FALSE(fs::exists(overlay));
  EXPECT_FALSE(fs::exists(vm_dir("vm-1")));
}

// What is wrong with a disk is said before anything boots.
TEST_F(MicroVmDiskTest, DiskRefusalsSayWhy) {
  create_vm_session("vm-1", 5, policy());
  const std::string layered = (dir_ / "layered.qcow2").string();
  ASSERT_EQ(std::system(("qemu-img create -q -f qcow2 -b " + base_ + " -F raw " + layered).c_str()), 0);
  const std::pair<std::string, const char*> cases[] = {
      {"relative.img", "--disk must be an absolute path"},
      {"/nonexistent.img", "--disk /nonexistent.img is not a readable file"},
      {dir_.string(), "is not a readable file"},
      {layered, "has a backing file of its own"},
  };
  for (const auto& [disk, why] : cases) {
    json r = call("vm.run", {{"session", "vm-1"},
                             {"kernel", kGuestDir + "/vmlinuz"},
                             {"initrd", kGuestDir + "/initramfs.cpio.gz"},
                             {"disk", disk}});
    EXPECT_FALSE(r["ok"]) << disk;
    EXPECT_NE(r.dump().find(why), std::string::npos) << disk << " -> " << r.dump();
  }
  EXPECT_TRUE(call("vm.list")["result"].empty());
  EXPECT_FALSE(fs::exists(vm_dir("vm-1")));
}

TEST_F(MicroVmTest, RefusalsSayWhy) {
  create_vm_session("vm-1", 5, policy());
  const std::pair<json, const char*> cases[] = {
      {json{{"session", "nope"},
            {"kernel", kGuestDir + "/vmlinuz"},
            {"initrd", kGuestDir + "/initramfs.cpio.gz"}},
       "no session"},
      {json{{"session", "vm-1"}, {"kernel", "relative"}, {"initrd", kGuestDir + "/initramfs.cpio.gz"}},
       "absolute"},
      {json{{"session", "vm-1"}, {"kernel", "/nonexistent"}, {"initrd", kGuestDir + "/initramfs.cpio.gz"}},
       "not a readable file"},
      {json{{"session", "vm-1"},
            {"kernel", kGuestDir + "/vmlinuz"},
            {"initrd", kGuestDir + "/initramfs.cpio.gz"},
            {"backend", "firecracker"}},
       "firecracker is unavailable"},
      // The lab guest's TAP has its frame pump attached: not a VM's to take.
      {json{{"session", "user-1"},
            {"kernel", kGuestDir + "/vmlinuz"},
            {"initrd", kGuestDir + "/initramfs.cpio.gz"}},
       "cannot attach"},
  };
  for (const auto& [args, why] : cases) {
    json r = call("vm.run", args);
    EXPECT_FALSE(r["ok"]) << args.dump();
    EXPECT_NE(r.dump().find(why), std::string::npos) << args.dump() << " -> " << r.dump();
  }
  EXPECT_TRUE(call("vm.list")["result"].empty());
}

}  // namespace
}  // namespace zn::test
