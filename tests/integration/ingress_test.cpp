// Declared ports (issue 14): a guest's port is reachable from the host side
// only through zerod's listener, only once declared, and (by default) only
// by a client holding a one-time ticket or the binding it left. Real zerod,
// real lab guest running an HTTP server, real curl on the host side; the
// datapath's half is checked with a marked socket of the test's own.
#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// Answers every request with what it received: the port, the request line,
// the headers and the body (Content-Length or chunked), so a test sees
// exactly what reached the guest; each request is also logged whole to the
// file named first (what reached the guest, whether or not its answer got
// back). Keeps connections open unless asked to close.
constexpr const char* kGuestServer = R"py(import http.server, socket, sys, threading
log_path = sys.argv[1]
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def read_body(self):
        if self.headers.get('Transfer-Encoding', '').lower() == 'chunked':
            data = b''
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b''):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length', 0)))
    def do_GET(self):
        payload = self.read_body()
        body = ('port=%d line=%s\n' % (self.server.server_address[1], self.requestline)).encode()
        body += ''.join('%s: %s\n' % kv for kv in self.headers.items()).encode()
        if payload:
            body += b'body=' + payload + b'\n'
        with lock, open(log_path, 'ab') as f:
            f.write(body + b'--\n')
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()
for port in sys.argv[2:]:
    s = S(('::', int(port)), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
threading.Event().wait()
)py";

// A connection straight to the guest from the gateway address with the
// exposure mark, as only zerod (CAP_NET_ADMIN) can make: prints the answer's
// first line, or "failed".
constexpr const char* kMarkedConnect = R"py(import socket, sys
family = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
s = socket.socket(family, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, 36, int(sys.argv[4], 0))
s.bind((sys.argv[1], 0))
s.settimeout(2)
try:
    s.connect((sys.argv[2], int(sys.argv[3])))
    s.sendall(b'GET /marked HTTP/1.0\r\n\r\n')
    print(s.recv(100).split(b'\r\n')[0].decode())
except Exception:
    print('failed')
)py";

// Sends a request head in pieces (split reads), a pause between each.
constexpr const char* kSplitSender = R"py(import socket, sys, time
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))
head = sys.argv[2].encode().decode('unicode_escape').encode()
step = int(sys.argv[3])
for i in range(0, len(head), step):
    s.sendall(head[i:i + step])
    time.sleep(float(sys.argv[4]))
data = b''
s.settimeout(5)
try:
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
except Exception:
    pass
print(data.decode(errors='replace'))
)py";

// `client.py SOURCE PORT MODE ARGS...`, connecting from SOURCE:
//  send HEX...      one connection; each HEX (bytes, hex-encoded) is sent
//                   after the answer to the one before has come (keep-alive:
//                   "@" prefixed sends it in the same write as the one
//                   before, pipelined); prints everything received, until the
//                   connection ends.
//  guess N          N connections, each with a made-up ticket; prints the
//                   count of each answer's status and the seconds taken.
constexpr const char* kClient = R"py(import collections, os, socket, sys, time
source, port, mode, args = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]

def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(('127.0.0.1', port))
    return s

def answer(s, need):
    data = b''
    try:
        while need(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        data += b'[timeout]'
    return data

if mode == 'send':
    s = connect()
    writes = []
    for a in args:
        if a.startswith('@'):
            writes[-1] += bytes.fromhex(a[1:])
        else:
            writes.append(bytes.fromhex(a))
    out = b''
    for i, w in enumerate(writes):
        try:
            s.sendall(w)
        except OSError as e:
            out += b'[send failed]'
            break
        # The first answer whole (its Content-Length), then the rest until the end.
        if i + 1 < len(writes):
            def first_whole(d):
                if b'\r\n\r\n' not in d:
                    return True
                head, body = d.split(b'\r\n\r\n', 1)
                for line in head.split(b'\r\n'):
                    if line.lower().startswith(b'content-length:'):
                        return len(body) < int(line.split(b':')[1])
                return False
            out += answer(s, first_whole)
    out += answer(s, lambda d: True)
    sys.stdout.write(out.decode(errors='replace'))
else:
    counts = collections.Counter()
    start = time.monotonic()
    for i in range(int(args[0])):
        s = connect()
        s.sendall(b'GET /guess HTTP/1.1\r\nHost: x\r\nZn-Ticket: znt_' + os.urandom(16).hex()[:32].encode() + b'\r\n\r\n')
        line = answer(s, lambda d: b'\r\n' not in d).split(b'\r\n')[0]
        counts[line.split(b' ')[1].decode() if b' ' in line else 'none'] += 1
        s.close()
    print(' '.join('%s=%d' % kv for kv in sorted(counts.items())), 'seconds=%.2f' % (time.monotonic() - start))
)py";

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

class IngressTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    config["expose_head_timeout_ms"] = 2000;
    // 20 refusals per client, then (within a test) no more: the guessing
    // test's bound does not depend on how fast the machine is.
    config["expose_refusal_burst"] = 20;
    config["expose_refusals_per_minute"] = 1;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(dir_ / "guest_server.py") << kGuestServer;
    std::ofstream(dir_ / "marked_connect.py") << kMarkedConnect;
    std::ofstream(dir_ / "split_sender.py") << kSplitSender;
    std::ofstream(dir_ / "client.py") << kClient;
    servers_.push_back(spawn_in(lab_->guests()[0].netns, {"python3", (dir_ / "guest_server.py").string(),
                                                          guest_log().string(), "8080", "8081", "9090"}));
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      up = guest("nc -z -w 1 127.0.0.1 8080 && nc -z -w 1 127.0.0.1 9090").exit_code == 0;
      if (!up) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(up) << "the guest's server never listened";
    json s = call("session.show", {{"id", "user-1"}})["result"];
    const std::string a = s["network"]["address"];
    guest_ip_ = a.substr(0, a.find('/'));
    gateway_ip_ = s["network"]["gateway"];
    const std::string a6 = s["network"]["address6"];
    guest_ip6_ = a6.substr(0, a6.find('/'));
    gateway_ip6_ = s["network"]["gateway6"];
  }

  CommandResult host(const std::string& cmd) { return run_in_netns(lab_->host_netns(), cmd); }
  // Declares `port`; returns the listener's port.
  uint16_t expose(uint16_t port, const std::string& mode = "ticket", unsigned family = 4) {
    json r = call("session.expose", {{"id", "user-1"}, {"port", port}, {"mode", mode}, {"family", family}});
    EXPECT_TRUE(r["ok"]) << r.dump();
    const std::string listen = r["result"]["listen"];
    return static_cast<uint16_t>(std::stoul(listen.substr(listen.rfind(':') + 1)));
  }
  std::string ticket(uint16_t port, unsigned ttl_s = 60) {
    json r = call("session.ticket", {{"id", "user-1"}, {"port", port}, {"ttl_s", ttl_s}});
    EXPECT_TRUE(r["ok"]) << r.dump();
    return r["result"]["ticket"];
  }
  // curl from the host side; `-w` appends the status.
  std::string get(const std::string& path_and_flags, const std::string& source = "") {
    const std::string iface = source.empty() ? "" : " --interface " + source;
    return host("curl -s -m 5" + iface + " -w ' status=%{http_code}' " + path_and_flags +
                " 2>&1 | head -c 4000")
        .output;
  }
  std::string url(uint16_t listen, const std::string& path) {
    return "'http://127.0.0.1:" + std::to_string(listen) + path + "'";
  }
  std::string marked(const std::string& from, const std::string& to, uint16_t port,
                     unsigned mark = ZN_MARK_EXPOSE) {
    return host("python3 " + (dir_ / "marked_connect.py").string() + " " + from + " " + to + " " +
                std::to_string(port) + " " + std::to_string(mark))
        .output;
  }
  std::string ingress_events(const std::vector<std::string>& needles) {
    return audit_events("ingress:", needles);
  }

  // Every request that reached the guest's server, whole.
  fs::path guest_log() const { return dir_ / "guest_requests.log"; }
  // `client.py` (kClient) from the host side, `source` its address.
  std::string client(const std::string& args, const std::string& source = "127.0.0.1") {
    return host("timeout 60 python3 " + (dir_ / "client.py").string() + " " + source + " " + args + " 2>&1")
        .output;
  }

  std::string guest_ip_, gateway_ip_, guest_ip6_, gateway_ip6_;
};

TEST_F(IngressTest, ADeclaredPortAdmitsATicketOnceAndNothingElse) {
  // Before the port is declared, not even zerod's mark opens it.
  EXPECT_EQ(marked(gateway_ip_, guest_ip_, 8080), "failed\n");

  const uint16_t listen = expose(8080);
  // The same marked connection now reaches the guest (the datapath's positive
  // control), to the declared port only.
  EXPECT_EQ(marked(gateway_ip_, guest_ip_, 8080), "HTTP/1.1 200 OK\n");
  EXPECT_EQ(marked(gateway_ip_, guest_ip_, 9090), "failed\n");
  // The host-reply mark is no way in either.
  EXPECT_EQ(marked(gateway_ip_, guest_ip_, 8080, ZN_MARK_HOST_REPLY), "failed\n");

  // No ticket: refused, and nothing reaches the guest.
  std::string r = get(url(listen, "/hello"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  EXPECT_EQ(r.find("port=8080"), std::string::npos) << r;

  const std::string t = ticket(8080);
  r = get("-i -H 'Zn-Ticket: " + t + "' " + url(listen, "/hello"));
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  EXPECT_NE(r.find("line=GET /hello HTTP/1.1"), std::string::npos) << r;
  EXPECT_NE(r.find("Set-Cookie: zn_ingress_8080=znb_"), std::string::npos) << r;
  EXPECT_EQ(r.find(t), std::string::npos) << "the ticket reached the guest: " << r;
  EXPECT_EQ(r.find("Zn-Ticket"), std::string::npos) << r;

  // Replayed: refused, with the body every refusal has.
  r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/again"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  EXPECT_EQ(r.find("port=8080"), std::string::npos) << r;
  // A made-up ticket of the right shape.
  r = get("-H 'Zn-Ticket: znt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' " + url(listen, "/guess"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;

  const std::string events =
      ingress_events({"ticket_used", "no_ticket", "unknown_ticket", "\"via\":\"ticket\""});
  EXPECT_NE(events.find("ingress:expose"), std::string::npos) << events;
  EXPECT_NE(events.find("ingress:ticket"), std::string::npos) << events;
  EXPECT_NE(events.find("ingress:admit {\"client\":\"127.0.0.1\",\"port\":8080,\"via\":\"ticket\"}"),
            std::string::npos)
      << events;
  EXPECT_NE(events.find("\"reason\":\"no_ticket\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"ticket_used\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"unknown_ticket\""), std::string::npos) << events;
  EXPECT_EQ(events.find(t), std::string::npos) << "a ticket in the audit";
}

TEST_F(IngressTest, EveryTicketCarrierIsTakenOutBeforeTheGuest) {
  const uint16_t listen = expose(8080);
  // Query parameter: the others stay, in order.
  std::string t = ticket(8080);
  std::string r = get(url(listen, "/q?a=1&zn_ticket=" + t + "&b=2"));
  EXPECT_NE(r.find("line=GET /q?a=1&b=2 HTTP/1.1"), std::string::npos) << r;
  // Percent-encoded name, as the guest's server would decode it.
  t = ticket(8080);
  r = get(url(listen, "/e?%7An_ticket=" + t));
  EXPECT_NE(r.find("line=GET /e HTTP/1.1"), std::string::npos) << r;
  // Path prefix.
  t = ticket(8080);
  r = get(url(listen, "/_zn/" + t + "/sub/x?y=1"));
  EXPECT_NE(r.find("line=GET /sub/x?y=1 HTTP/1.1"), std::string::npos) << r;
  t = ticket(8080);
  r = get(url(listen, "/_zn/" + t));
  EXPECT_NE(r.find("line=GET / HTTP/1.1"), std::string::npos) << r;

  // Two carriers at once (even of the same ticket): 400, the ticket unspent.
  t = ticket(8080);
  r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/two?zn_ticket=" + t));
  EXPECT_NE(r.find("status=400"), std::string::npos) << r;
  r = get("-H 'Zn-Ticket: " + t + "' -H 'zn-ticket: " + t + "' " + url(listen, "/dup"));
  EXPECT_NE(r.find("status=400"), std::string::npos) << r;
  r = get(url(listen, "/_zn//x"));
  EXPECT_NE(r.find("status=400"), std::string::npos) << r;
  // Split reads: the head a few bytes at a time still finds its ticket.
  r = host("python3 " + (dir_ / "split_sender.py").string() + " " + std::to_string(listen) +
           " 'GET /split HTTP/1.1\\r\\nHost: x\\r\\nZn-Ticket: " + t +
           "\\r\\nConnection: close\\r\\n\\r\\n' 7 0.02")
          .output;
  EXPECT_NE(r.find("line=GET /split HTTP/1.1"), std::string::npos) << r;
  EXPECT_EQ(r.find(t), std::string::npos) << r;
  // A head that never ends is refused at its deadline, never passed on.
  r = host("python3 " + (dir_ / "split_sender.py").string() + " " + std::to_string(listen) +
           " 'GET /slow HTTP/1.1\\r\\nHost: x\\r\\n' 100 0")
          .output;
  EXPECT_EQ(r.find("port=8080"), std::string::npos) << r;

  // A ticket is for its port: used on another declared port it is refused
  // there, and spent.
  const uint16_t other = expose(8081);
  t = ticket(8080);
  r = get("-H 'Zn-Ticket: " + t + "' " + url(other, "/x"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/x"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  // Expired.
  t = ticket(8080, 1);
  std::this_thread::sleep_for(1500ms);
  r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/late"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  const std::string events = ingress_events(
      {"ticket_wrong_port", "ticket_expired", "\"reason\":\"malformed\"", "request head timeout"});
  for (const char* reason :
       {"ticket_wrong_port", "ticket_expired", "\"reason\":\"malformed\"", "request head timeout"})
    EXPECT_NE(events.find(reason), std::string::npos) << reason << "\n" << events;
}

TEST_F(IngressTest, ARedeemedTicketBindsItsClientOnly) {
  const uint16_t listen = expose(8080);
  const std::string t = ticket(8080);
  std::string r = get("-i -H 'Zn-Ticket: " + t + "' " + url(listen, "/first"));
  const size_t at = r.find("zn_ingress_8080=");
  ASSERT_NE(at, std::string::npos) << r;
  const std::string binding = r.substr(at + 16, r.find(';', at) - at - 16);
  // A new connection with the cookie: admitted; the cookie itself is taken
  // out, the client's other cookies pass on.
  r = get("-H 'Cookie: theme=dark; zn_ingress_8080=" + binding + "; lang=en' " + url(listen, "/next"));
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  EXPECT_NE(r.find("Cookie: theme=dark; lang=en"), std::string::npos) << r;
  EXPECT_EQ(r.find(binding), std::string::npos) << r;
  // From another client address: refused.
  r = get("-H 'Cookie: zn_ingress_8080=" + binding + "' " + url(listen, "/stolen"), "127.0.0.2");
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  // For another port: refused there.
  const uint16_t other = expose(8081);
  r = get("-H 'Cookie: zn_ingress_8081=" + binding + "' " + url(other, "/elsewhere"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  const std::string events =
      ingress_events({"binding_other_client", "unknown_binding", "\"via\":\"binding\""});
  EXPECT_NE(events.find("binding_other_client"), std::string::npos) << events;
  EXPECT_NE(events.find("unknown_binding"), std::string::npos) << events;
  EXPECT_NE(events.find("\"via\":\"binding\""), std::string::npos) << events;
}

TEST_F(IngressTest, PublicPortsIPv6AndUndeclaring) {
  // Public, over IPv6 to the guest: anyone who reaches the listener.
  uint16_t listen = expose(8080, "public", 6);
  EXPECT_EQ(marked(gateway_ip6_, guest_ip6_, 8080), "HTTP/1.1 200 OK\n");
  EXPECT_EQ(marked(gateway_ip6_, guest_ip6_, 9090), "failed\n");
  std::string r = get(url(listen, "/open"));
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  EXPECT_NE(r.find("line=GET /open"), std::string::npos) << r;
  json shown = call("session.exposed", {{"id", "user-1"}});
  EXPECT_EQ(shown["result"][0]["mode"], "public") << shown.dump();
  // A ticket for a public port is a mistake the operator is told of.
  json refused = call("session.ticket", {{"id", "user-1"}, {"port", 8080}});
  EXPECT_FALSE(refused["ok"]) << refused.dump();

  // Undeclared: the listener is gone and the datapath closed again.
  json u = call("session.unexpose", {{"id", "user-1"}, {"port", 8080}});
  ASSERT_TRUE(u["ok"]) << u.dump();
  r = get(url(listen, "/closed"));
  EXPECT_NE(r.find("status=000"), std::string::npos) << r;
  EXPECT_EQ(marked(gateway_ip6_, guest_ip6_, 8080), "failed\n");
  EXPECT_EQ(marked(gateway_ip_, guest_ip_, 8080), "failed\n");

  // Bad requests are refused with reasons.
  for (const json& bad :
       {json{{"id", "user-1"}, {"port", 0}}, json{{"id", "user-1"}, {"port", 70000}},
        json{{"id", "user-1"}, {"port", 8080}, {"proto", "udp"}},
        json{{"id", "user-1"}, {"port", 8080}, {"mode", "open"}}, json{{"id", "nobody"}, {"port", 8080}}}) {
    json e = call("session.expose", bad);
    EXPECT_FALSE(e["ok"]) << bad.dump();
  }
  EXPECT_FALSE(call("session.unexpose", {{"id", "user-1"}, {"port", 8080}})["ok"]);
}

TEST_F(IngressTest, TheGuestGetsNoInwardPathOfItsOwn) {
  const uint16_t listen = expose(8080);
  // From its declared port the guest reaches no host service on the gateway
  // (a listener there, made for the test), nor zerod's listener.
  servers_.push_back(spawn_in(
      lab_->host_netns(),
      {"socat", "TCP-LISTEN:2222,bind=" + gateway_ip_ + ",reuseaddr,fork", "EXEC:echo host-service"}));
  bool up = false;
  for (int i = 0; i < 50 && !up; ++i) {
    up = host("nc -z -w 1 " + gateway_ip_ + " 2222").exit_code == 0;
    if (!up) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(up);
  EXPECT_EQ(guest("nc -w 2 -p 8080 " + gateway_ip_ + " 2222 </dev/null").output.find("host-service"),
            std::string::npos);
  EXPECT_NE(guest("nc -z -w 2 -p 8080 " + gateway_ip_ + " " + std::to_string(listen)).exit_code, 0);
  // The same listener from the host is the positive control.
  EXPECT_NE(host("nc -w 2 " + gateway_ip_ + " 2222 </dev/null").output.find("host-service"),
            std::string::npos);
}

TEST_F(IngressTest, DeclaredPortsSurviveARestartAndGoWithTheirSession) {
  const uint16_t listen = expose(8080);
  const std::string t = ticket(8080);
  stop_zerod(SIGTERM);
  start_zerod();
  // The same listener again; tickets were memory only: the old one is dead.
  std::string r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/old"));
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  r = get("-H 'Zn-Ticket: " + ticket(8080) + "' " + url(listen, "/new"));
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  // Deleting the session closes its ports.
  ASSERT_TRUE(call("session.delete", {{"id", "user-1"}})["ok"]);
  r = get(url(listen, "/gone"));
  EXPECT_NE(r.find("status=000"), std::string::npos) << r;
}

// One request per connection on a ticket port (issue 30): a second request
// on the admitted connection (kept alive, or pipelined in the same write)
// never reaches the guest, so neither does the unredeemed ticket or the
// binding cookie it carries; the first request's body goes whole, framed by
// its own head. Both sides are told "Connection: close".
TEST_F(IngressTest, OnlyTheAdmittedRequestOfAConnectionReachesTheGuest) {
  const uint16_t listen = expose(8080);
  const std::string port = std::to_string(listen);
  // A binding to carry, and a ticket never redeemed.
  std::string r = get("-i -H 'Zn-Ticket: " + ticket(8080) + "' " + url(listen, "/bind"));
  const size_t at = r.find("zn_ingress_8080=");
  ASSERT_NE(at, std::string::npos) << r;
  const std::string binding = r.substr(at + 16, r.find(';', at) - at - 16);
  const std::string spare = ticket(8080);
  const std::string second = "GET /second?zn_ticket=" + spare +
                             " HTTP/1.1\r\nHost: x\r\nZn-Ticket: " + spare +
                             "\r\nCookie: zn_ingress_8080=" + binding + "\r\n\r\n";
  const std::string second_path = "GET /_zn/" + spare + "/second HTTP/1.1\r\nHost: x\r\n\r\n";
  std::filesystem::remove(guest_log());

  struct Variant {
    std::string name, args;
    std::string first_line;  // what the guest must have seen of the first
  };
  const std::vector<Variant> variants = {
      // Kept alive: the second request after the first answer.
      {"keepalive",
       hex("GET /one HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nZn-Ticket: " + ticket(8080) +
           "\r\n\r\n") +
           " " + hex(second),
       "line=GET /one HTTP/1.1"},
      // Pipelined in the same write, behind a bodiless request.
      {"pipelined",
       hex("GET /two HTTP/1.1\r\nHost: x\r\nZn-Ticket: " + ticket(8080) + "\r\n\r\n" + second + second_path),
       "line=GET /two HTTP/1.1"},
      // Pipelined behind a body with a length: the body goes, the rest not.
      {"body",
       hex("POST /three HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nZn-Ticket: " + ticket(8080) +
           "\r\n\r\nhello world" + second),
       "line=POST /three HTTP/1.1"},
      // Behind a chunked body (an extension on a chunk): framed again, the rest not.
      {"chunked",
       hex("POST /four HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nZn-Ticket: " + ticket(8080) +
           "\r\n\r\n5\r\nhel") +
           " @" + hex("lo\r\n6;x=1\r\n world\r\n0\r\n\r\n" + second),
       "line=POST /four HTTP/1.1"},
      // Admitted by the binding, then a ticket in the next request.
      {"binding",
       hex("GET /five HTTP/1.1\r\nHost: x\r\nCookie: zn_ingress_8080=" + binding + "\r\n\r\n") + " " +
           hex(second),
       "line=GET /five HTTP/1.1"},
  };
  for (const Variant& v : variants) {
    r = client(port + " send " + v.args);
    // One answer, from the guest, that says the connection ends.
    EXPECT_EQ(count(r, "HTTP/1.1 200"), 1u) << v.name << "\n" << r;
    EXPECT_NE(r.find(v.first_line), std::string::npos) << v.name << "\n" << r;
    EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << v.name << "\n" << r;
    EXPECT_EQ(r.find("Connection: keep-alive"), std::string::npos) << v.name << "\n" << r;  // nor the guest
    if (v.name == "body" || v.name == "chunked") {
      EXPECT_NE(r.find("body=hello world"), std::string::npos) << v.name << "\n" << r;
    }
  }
  // What reached the guest: the five first requests, nothing of the second.
  const std::string got = slurp(guest_log());
  EXPECT_EQ(count(got, "--\n"), 5u) << got;
  for (const std::string& leak : {std::string("/second"), spare, binding, std::string("Zn-Ticket"),
                                  std::string("zn_ticket"), std::string("zn_ingress_")})
    EXPECT_EQ(got.find(leak), std::string::npos) << leak << "\n" << got;
  EXPECT_EQ(count(got, "Connection: close"), 5u) << got;  // the guest was asked to close
  // The spare ticket was never redeemed (nor passed on): it admits once now.
  r = get("-H 'Zn-Ticket: " + spare + "' " + url(listen, "/spare"));
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  // What the client sent after its request is counted, never forwarded.
  const std::string events = ingress_events({"\"bytes_dropped\":" + std::to_string(second.size())});
  EXPECT_NE(events.find("\"bytes_dropped\":" + std::to_string(second.size())), std::string::npos) << events;
}

// Made-up tickets from one client (issue 30): past its budget of refusals
// it is answered 429 unread (a valid ticket too, which stays unspent),
// without an audit record each, and the refusals are summarised with a
// count. Another client is not held back by the first.
TEST_F(IngressTest, AGuessingClientIsBoundedAndItsRefusalsSummarised) {
  const uint16_t listen = expose(8080);
  const std::string port = std::to_string(listen);
  std::string r = client(port + " guess 300");
  // The budget: 20 refusals (then one a minute, in this fixture).
  int refused = 0, throttled = 0;
  double seconds = 0;
  std::sscanf(r.c_str() + (r.find("403=") == std::string::npos ? 0 : r.find("403=")), "403=%d", &refused);
  if (const size_t t = r.find("429="); t != std::string::npos)
    std::sscanf(r.c_str() + t, "429=%d", &throttled);
  if (const size_t t = r.find("seconds="); t != std::string::npos)
    std::sscanf(r.c_str() + t, "seconds=%lf", &seconds);
  EXPECT_EQ(refused + throttled, 300) << r;
  EXPECT_GE(refused, 20) << r;
  EXPECT_LE(refused, 21) << r;
  // Still throttled: a valid ticket from it is refused unread, told when
  // its next refusal is due (one a minute: within 60 s) ...
  const std::string t = ticket(8080);
  r = get("-i -H 'Zn-Ticket: " + t + "' " + url(listen, "/throttled"));
  EXPECT_NE(r.find("status=429"), std::string::npos) << r;
  int retry_after = 0;
  if (const size_t at = r.find("Retry-After: "); at != std::string::npos)
    std::sscanf(r.c_str() + at, "Retry-After: %d", &retry_after);
  EXPECT_GE(retry_after, 1) << r;
  EXPECT_LE(retry_after, 60) << r;
  // ... and unspent: another client redeems it. That client's own made-up
  // ticket is refused as any (403), not throttled.
  r = get("-H 'Zn-Ticket: " + t + "' " + url(listen, "/other"), "127.0.0.2");
  EXPECT_NE(r.find("status=200"), std::string::npos) << r;
  r = get("-i -H 'Zn-Ticket: znt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' " + url(listen, "/other-guess"),
          "127.0.0.2");
  EXPECT_NE(r.find("status=403"), std::string::npos) << r;
  EXPECT_EQ(r.find("Retry-After"), std::string::npos) << r;  // a refusal, not a throttle

  // The audit: one record per refusal within the budget; the rest summed in
  // "rate_limited" records with counts (within a few seconds of the flood).
  const int want_summed = throttled + 1;  // the valid ticket's attempt too
  std::string events;
  int audited = 0, summed = 0, summaries = 0;
  for (int i = 0; i < 100; ++i) {
    events = audit_events("ingress:deny");
    audited = summed = summaries = 0;
    std::istringstream lines(events);
    for (std::string line; std::getline(lines, line);) {
      const json detail = json::parse(line.substr(line.find(' ') + 1));
      if (detail["client"] != "127.0.0.1") continue;
      if (detail["reason"] == "rate_limited") {
        summed += detail["count"].get<int>();
        ++summaries;
      } else {
        ++audited;
      }
    }
    if (summed >= want_summed) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(audited, refused) << events;
  EXPECT_EQ(summed, want_summed) << events;
  EXPECT_LE(summaries, static_cast<int>(seconds) + 8) << events;  // about one a second, not one each
  EXPECT_NE(events.find("\"client\":\"127.0.0.2\",\"port\":8080,\"reason\":\"unknown_ticket\""),
            std::string::npos)
      << events;
}

}  // namespace
}  // namespace zn::test
