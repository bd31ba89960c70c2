// Declared ports (issue 14): a guest's port is reachable from the host side
// only through zerod's listener, only once declared, and (by default) only
// by a client holding a one-time ticket or the binding it left. Real zerod,
// real lab guest running an HTTP server, real curl on the host side; the
// datapath's half is checked with a marked socket of the test's own.
#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// Answers every request with what it received: the port, the request line
// and the headers, so a test sees exactly what reached the guest.
constexpr const char* kGuestServer = R"py(import http.server, socket, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def handle_one_request(self):
        return super().handle_one_request()
    def do_GET(self):
        body = ('port=%d line=%s\n' % (self.server.server_address[1], self.requestline)).encode()
        body += ''.join('%s: %s\n' % kv for kv in self.headers.items()).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()
for port in sys.argv[1:]:
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

class IngressTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    config["expose_head_timeout_ms"] = 2000;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(dir_ / "guest_server.py") << kGuestServer;
    std::ofstream(dir_ / "marked_connect.py") << kMarkedConnect;
    std::ofstream(dir_ / "split_sender.py") << kSplitSender;
    servers_.push_back(spawn_in(lab_->guests()[0].netns,
                                {"python3", (dir_ / "guest_server.py").string(), "8080", "8081", "9090"}));
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

}  // namespace
}  // namespace zn::test
