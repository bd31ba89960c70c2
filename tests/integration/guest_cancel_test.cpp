// The guest giving up (issue 30): a request held for approval whose guest
// goes (curl killed, a socket reset, an HTTP/2 stream cancelled with
// RST_STREAM) ends with one audited outcome, egress:ask_cancelled, and its
// ticket leaves the book; a guest that resets or cancels mid-response is
// audited as its cancel (egress:allow, "outcome":"guest_cancelled") and
// counted as one, never as an upstream failure. Positive controls: an
// approved request goes through; an upstream that dies mid-response is
// still an upstream failure. Real zerod, real clients in the lab guest
// (curl, python3 sockets and python3-h2).
#include <signal.h>

#include <future>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// `guest_client.py MODE TRIGGER PATH...`, from the guest, one request per
// PATH, printing a line per event (TRIGGER "-": none):
//  h1-held    plain HTTP/1.1 DELETE PATH[0]; once TRIGGER exists, the socket
//             is closed with SO_LINGER 0 (a reset).
//  h1-reset   plain HTTP/1.1 GET PATH[0]; after its head and 64 KiB of body,
//             a reset.
//  h2-held    HTTP/2 over TLS: DELETE PATH[0]; once TRIGGER exists,
//             RST_STREAM(CANCEL); then on the same connection DELETE PATH[1],
//             its status printed (the test approves it).
//  h2-reset   HTTP/2 over TLS: GET PATH[0]; after its head and 32 KiB of body,
//             RST_STREAM(CANCEL); then GET PATH[1] on the same connection.
constexpr const char* kGuestClient = R"py(import os, socket, ssl, struct, sys, time
import h2.config, h2.connection, h2.errors, h2.events
mode, trigger, paths = sys.argv[1], sys.argv[2], sys.argv[3:]

def wait_for_trigger():
    while not os.path.exists(trigger):
        time.sleep(0.02)

def reset(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
    s.close()

def address(port):
    # Resolved through zerod, as any client's name is: the proxy connects
    # only to what it told the guest.
    return socket.getaddrinfo('api.github.com', port, socket.AF_INET, socket.SOCK_STREAM)[0][4]

if mode.startswith('h1'):
    s = socket.create_connection(address(80), timeout=30)
    method = 'DELETE' if mode == 'h1-held' else 'GET'
    s.sendall(('%s %s HTTP/1.1\r\nHost: api.github.com\r\nContent-Length: 0\r\n\r\n' % (method, paths[0])).encode())
    if mode == 'h1-held':
        wait_for_trigger()
    else:
        got = b''
        while b'\r\n\r\n' not in got or len(got) < 65536:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        print('h1 got', got.split(b'\r\n')[0].decode(), flush=True)
    reset(s)
    print('reset', flush=True)
    sys.exit(0)

ctx = ssl.create_default_context(cafile=os.environ['CAFILE'])
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection(address(443), timeout=30), server_hostname='api.github.com')
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
c.initiate_connection()
# A connection window that what is still in flight for a cancelled stream
# cannot use up (the next stream's answer must fit).
c.increment_flow_control_window(2 ** 30)
s.sendall(c.data_to_send())
events = []

def pump():
    data = s.recv(65536)
    if not data:
        raise EOFError
    events.extend(c.receive_data(data))
    out = c.data_to_send()
    if out:
        s.sendall(out)

def request(method, path):
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(':method', method), (':scheme', 'https'), (':path', path),
                         (':authority', 'api.github.com')], end_stream=True)
    s.sendall(c.data_to_send())
    return sid

def status_of(sid):
    while True:
        for e in events:
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                return dict(e.headers)[':status']
            if isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                return 'reset'
        pump()

# Reads the stream to its end before the client goes: closing on the head
# would cancel the rest of the answer (one more guest cancel, under load).
def ended(sid):
    while not any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) and e.stream_id == sid
                  for e in events):
        pump()

def cancel(sid):
    c.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
    s.sendall(c.data_to_send())
    print('cancelled', flush=True)

if mode == 'h2-held':
    sid = request('DELETE', paths[0])
    s.settimeout(0.05)
    while not os.path.exists(trigger):
        try:
            pump()
        except socket.timeout:
            pass
    s.settimeout(30)
    cancel(sid)
    second = request('DELETE', paths[1])
    print('second', status_of(second), flush=True)
    ended(second)
else:
    sid = request('GET', paths[0])
    print('first', status_of(sid), flush=True)
    got = 0
    while got < 32768:
        for e in [e for e in events if isinstance(e, h2.events.DataReceived) and e.stream_id == sid]:
            got += len(e.data)
            events.remove(e)
        if got < 32768:
            pump()
    cancel(sid)
    second = request('GET', paths[1])
    print('second', status_of(second), flush=True)
    ended(second)
s.close()
)py";

class GuestCancelTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    config["proxy_http2"] = true;
    // Longer than any step here: a ticket that leaves the book was cancelled.
    config["approval_timeout_ms"] = 30000;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string p2 =
        policy(R"({"host":"api.github.com","methods":["DELETE"],"paths":["/repos/**"],"action":"ask"},)");
    ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", p2}})["ok"]);
    std::ofstream(dir_ / "guest_client.py") << kGuestClient;
  }
  // The guest client in MODE (see kGuestClient), its output once it ends.
  std::future<std::string> client_async(const std::string& mode, const std::string& trigger,
                                        const std::vector<std::string>& paths) {
    std::string cmd = "CAFILE=" + p("guest-trust.pem") + " timeout 60 /usr/bin/python3 " +
                      (dir_ / "guest_client.py").string() + " " + mode + " " + trigger;
    for (const std::string& path : paths) cmd += " " + path;
    return std::async(std::launch::async, [this, cmd] { return guest(cmd + " 2>&1").output; });
  }
  std::string trigger(const std::string& name) const { return (dir_ / ("trigger-" + name)).string(); }
  // The ticket of the request held for `path` (0 if none within 10 s).
  uint64_t held(const std::string& path) {
    for (int i = 0; i < 100; ++i) {
      const json listed = call("approval.list");  // kept: the loop reads into it
      for (const auto& h : listed["result"])
        if (h["path"] == path) return h["ticket"].get<uint64_t>();
      std::this_thread::sleep_for(100ms);
    }
    return 0;
  }
  // Whether `ticket` left the book within 10 s.
  bool gone(uint64_t ticket) {
    for (int i = 0; i < 100; ++i) {
      const json list = call("approval.list");
      bool listed = false;
      for (const auto& h : list["result"]) listed = listed || h["ticket"] == ticket;
      if (!listed) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  // zn_proxy_requests_total{result=RESULT} now.
  long requests_metric(const std::string& result) {
    auto m = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
    const std::string line = "zn_proxy_requests_total{result=\"" + result + "\"} ";
    const size_t at = m.output.find(line);
    EXPECT_NE(at, std::string::npos) << m.output;
    return at == std::string::npos ? -1 : std::atol(m.output.c_str() + at + line.size());
  }
  // The audit's egress record for `path` (the first), once written.
  std::string egress_record(const std::string& path) {
    const std::string needle = "\"path\":\"" + path + "\"";
    std::istringstream lines(egress_events({needle}));
    for (std::string line; std::getline(lines, line);)
      if (line.find(needle) != std::string::npos) return line;
    return "";
  }
};

TEST_F(GuestCancelTest, AHeldRequestTheGuestGivesUpOnEndsCancelledAndLeavesTheBook) {
  // 1. curl killed while its request is held (HTTP/1.1 over TLS).
  const fs::path pid_file = dir_ / "curl.pid";
  auto killed = std::async(std::launch::async, [&] {
    return guest("sh -c 'echo $$ > " + pid_file.string() + "; exec curl -s --http1.1 -m 30 --cacert " +
                 p("guest-trust.pem") + " -X DELETE https://api.github.com/repos/h1/killed'")
        .output;
  });
  const uint64_t t_killed = held("/repos/h1/killed");
  ASSERT_NE(t_killed, 0u);
  const pid_t curl = std::stoi(slurp(pid_file));
  ASSERT_EQ(::kill(curl, SIGKILL), 0);
  killed.get();
  EXPECT_TRUE(gone(t_killed));

  // 2. A plain HTTP/1.1 socket reset (SO_LINGER 0) while held.
  auto h1 = client_async("h1-held", trigger("h1"), {"/repos/h1/reset"});
  const uint64_t t_h1 = held("/repos/h1/reset");
  ASSERT_NE(t_h1, 0u);
  std::ofstream(trigger("h1")) << "go";
  EXPECT_EQ(h1.get(), "reset\n");
  EXPECT_TRUE(gone(t_h1));

  // 3. An HTTP/2 stream cancelled (RST_STREAM) while held; the connection
  // goes on, and its next request, approved, is the positive control.
  auto h2 = client_async("h2-held", trigger("h2"), {"/repos/h2/cancelled", "/repos/h2/approved"});
  const uint64_t t_h2 = held("/repos/h2/cancelled");
  ASSERT_NE(t_h2, 0u);
  std::ofstream(trigger("h2")) << "go";
  EXPECT_TRUE(gone(t_h2));
  const uint64_t t_ok = held("/repos/h2/approved");
  ASSERT_NE(t_ok, 0u);
  ASSERT_TRUE(call("approval.allow", {{"ticket", t_ok}})["ok"]);
  EXPECT_EQ(h2.get(), "cancelled\nsecond 200\n");

  // A cancelled ticket cannot be decided afterwards.
  for (uint64_t t : {t_killed, t_h1, t_h2}) EXPECT_FALSE(call("approval.allow", {{"ticket", t}})["ok"]) << t;
  // Each ask has exactly one outcome: cancelled for the three, approved for
  // the control; nothing of the cancelled ones went upstream.
  const std::string events = egress_events({"egress:ask_cancelled", "egress:approved", "/repos/h2/approved"});
  for (uint64_t t : {t_killed, t_h1, t_h2}) {
    const std::string ticket = "\"ticket\":" + std::to_string(t);
    EXPECT_EQ(count(events, ticket), 2u) << t << "\n" << events;  // egress:ask and its outcome
    EXPECT_NE(events.find("egress:ask_cancelled {\"reason\":\"cancelled by the guest\"," + ticket + "}"),
              std::string::npos)
        << t << "\n"
        << events;
  }
  EXPECT_EQ(count(events, "egress:ask_cancelled"), 3u) << events;
  EXPECT_EQ(count(events, "egress:ask_timeout"), 0u) << events;
  EXPECT_EQ(count(events, "egress:approved"), 1u) << events;
  const std::string upstream = upstream_log();
  EXPECT_NE(upstream.find("/repos/h2/approved"), std::string::npos);
  for (const char* path : {"/repos/h1/killed", "/repos/h1/reset", "/repos/h2/cancelled"})
    EXPECT_EQ(upstream.find(path), std::string::npos) << path;
}

TEST_F(GuestCancelTest, AGuestsResetMidResponseIsItsCancelNotAnUpstreamFailure) {
  const long failures = requests_metric("upstream_failure");
  const long cancels = requests_metric("guest_cancelled");

  // A raw socket reset (SO_LINGER 0) after the head and part of a large body.
  EXPECT_EQ(client_async("h1-reset", "-", {"/repos/x/bytes/50000000"}).get(),
            "h1 got HTTP/1.1 200 OK\nreset\n");
  // An HTTP/2 stream cancelled mid-body; the connection's next stream is
  // served (the positive control on the same connection).
  EXPECT_EQ(client_async("h2-reset", "-", {"/repos/y/bytes/50000000", "/repos/y/after"}).get(),
            "first 200\ncancelled\nsecond 200\n");
  for (const char* path : {"/repos/x/bytes/50000000", "/repos/y/bytes/50000000"}) {
    const std::string record = egress_record(path);
    EXPECT_EQ(record.rfind("egress:allow ", 0), 0u) << record;
    EXPECT_NE(record.find("\"outcome\":\"guest_cancelled\""), std::string::npos) << record;
    EXPECT_NE(record.find("\"status\":200"), std::string::npos) << record;  // the response had started
  }
  EXPECT_EQ(requests_metric("guest_cancelled"), cancels + 2);
  EXPECT_EQ(requests_metric("upstream_failure"), failures);

  // The positive control: an upstream that dies mid-response is the
  // upstream's failure, audited and counted as one.
  const std::string r =
      curl("-o /dev/null -w '%{http_code}' https://api.github.com/repos/z/dies-mid-body").output;
  EXPECT_EQ(r, "200") << r;
  const std::string record = egress_record("/repos/z/dies-mid-body");
  EXPECT_EQ(record.find("guest_cancelled"), std::string::npos) << record;
  EXPECT_NE(record.find("\"error\""), std::string::npos) << record;
  EXPECT_EQ(requests_metric("upstream_failure"), failures + 1);
  EXPECT_EQ(requests_metric("guest_cancelled"), cancels + 2);
}

}  // namespace
}  // namespace zn::test
