// HTTP/2 through interception (issue 17), end to end: real HTTP/2 clients in
// the guest (curl --http2, nghttp) and raw frames from a script, zerod
// offering h2 by ALPN, every stream decided on its own by the same exchange
// as an HTTP/1.1 request and forwarded to the lab's HTTP/1.1 echo upstreams.
// The session's policy (zerod_fixture.h): api.github.com GET /repos/**;
// api.stripe.com identity cap:stripe; deny evil.example.

#include <iterator>
#include <sstream>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

// Raw HTTP/2 from the guest, for what no well-behaved client sends: the
// preface, then MODE:
//   reset N      N streams each opened (HEADERS) and reset (RST_STREAM)
//   ping N       N PINGs
//   cont N       one HEADERS without END_HEADERS, then N CONTINUATIONs
//   bomb N       an HPACK bomb: a 4000-byte field entered in the dynamic
//                table, then N 1-byte references to it in the same block
//   big N        N honest large requests (a 30 KB literal field each)
// and at the end one GET /repos/raw-final on a fresh stream. Prints
// "goaway <code>" if the proxy sent GOAWAY, and "status <code>" for the
// final request's answer.
constexpr const char* kRawH2 = R"py(import socket, ssl, struct, sys
mode, n, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection(('198.18.0.10', 443), timeout=10), server_hostname='api.github.com')
assert s.selected_alpn_protocol() == 'h2', s.selected_alpn_protocol()
def frame(t, flags, sid, payload=b''):
    return struct.pack('>I', len(payload))[1:] + bytes([t, flags]) + struct.pack('>I', sid) + payload
def hstr(b):
    n = len(b)
    if n < 127:
        return bytes([n]) + b
    out, n = [127], n - 127
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n]) + b
def block(sid, b, flags):
    pieces = [b[i:i + 16384] for i in range(0, len(b), 16384)]
    return b''.join(frame(1 if i == 0 else 9, (flags if i == 0 else 0) | (0x4 if i == len(pieces) - 1 else 0), sid, p)
                    for i, p in enumerate(pieces))
def hdrs(path):
    a = b'api.github.com'
    return b'\x82\x87' + b'\x44' + bytes([len(path)]) + path + b'\x41' + bytes([len(a)]) + a
out = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + frame(4, 0, 0)
sid = 1
if mode == 'reset':
    for i in range(n):
        out += frame(1, 0x4, sid, hdrs(b'/repos/reset')) + frame(3, 0, sid, struct.pack('>I', 8))
        sid += 2
elif mode == 'ping':
    for i in range(n):
        out += frame(6, 0, 0, struct.pack('>Q', i))
elif mode == 'cont':
    out += frame(1, 0x1, sid, b'\x82\x87')
    for i in range(n):
        out += frame(9, 0, sid, b'')
    out += frame(9, 0x4, sid, b'\x44\x08/repos/c\x41\x0eapi.github.com')
    sid += 2
elif mode == 'bomb':
    # :path and :authority not indexed: the bomb stays the newest entry (index 62)
    b = b'\x82\x87\x04' + hstr(b'/repos/bomb') + b'\x01' + hstr(b'api.github.com')
    b += b'\x40' + hstr(b'x-bomb') + hstr(b'a' * 4000)
    out += block(sid, b + b'\xbe' * n, 0x1)
    sid += 2
elif mode == 'big':
    for i in range(n):
        out += block(sid, hdrs(b'/repos/big') + b'\x10' + hstr(b'x-big') + hstr(b'b' * 30000), 0x1)
        sid += 2
out += frame(1, 0x5, sid, hdrs(b'/repos/raw-final'))
try:
    s.sendall(out)
except OSError:
    pass
buf, goaway, status = b'', None, None
try:
    while status is None and goaway is None:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], 'big')
            if len(buf) < 9 + length:
                break
            t, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], 'big') & 0x7fffffff
            payload = buf[9:9 + length]
            buf = buf[9 + length:]
            if t == 7:
                goaway = int.from_bytes(payload[4:8], 'big')
            if t == 4 and not flags & 1:
                s.sendall(frame(4, 1, 0))
            if t == 1 and stream == sid:
                # :status from the static table (0x88 = 200, 0x8d = 404, ...) or a literal
                b0 = payload[0]
                table = {0x88: 200, 0x89: 204, 0x8a: 206, 0x8b: 304, 0x8c: 400, 0x8d: 404, 0x8e: 500}
                try:
                    status = table.get(b0) or int(payload[2:5])
                except ValueError:
                    status = -1
except (socket.timeout, OSError):
    pass
if goaway is not None:
    print('goaway', goaway)
if status is not None:
    print('status', status)
if goaway is None and status is None:
    print('no answer')
)py";

class Http2Test : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    std::ofstream(dir_ / "raw_h2.py") << kRawH2;
    // Names resolved through zerod, as a guest's would be: the upstream is
    // pinned to what the guest was told.
    ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
    ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
  }
  // curl's options for one request of several (--next starts afresh).
  std::string h2(const std::string& args) { return "--http2 --cacert " + p("guest-trust.pem") + " " + args; }
  std::string raw_h2(const std::string& mode, int n) {
    return guest("python3 " + (dir_ / "raw_h2.py").string() + " " + mode + " " + std::to_string(n) + " " +
                 p("guest-trust.pem") + " 2>&1")
        .output;
  }
};

// Allowed, denied and misdirected streams on one connection: each decided
// on its own, the refusals answered on their stream, the connection kept.
TEST_F(Http2Test, StreamsOnOneConnectionAreDecidedOneByOne) {
  const std::string w = "-w '%{http_version} %{http_code} %{num_connects}\\n' -o /dev/null ";
  auto r =
      curl(h2(w + "https://api.github.com/repos/a") + " --next " + h2(w + "https://api.github.com/admin") +
           " --next " + h2(w + "-X POST https://api.github.com/repos/b") + " --next " +
           h2(w + "-H 'Host: api.stripe.com' https://api.github.com/repos/c") + " --next " +
           h2(w + "https://api.github.com/repos/d"));
  // One connection (later requests connect nothing new), HTTP/2 throughout.
  EXPECT_EQ(r.output, "2 200 1\n2 403 0\n2 403 0\n2 421 0\n2 200 0\n") << r.output;
  const std::string log = upstream_log();
  EXPECT_NE(log.find("/repos/a"), std::string::npos) << log;
  EXPECT_NE(log.find("/repos/d"), std::string::npos) << log;
  for (const char* never : {"/admin", "/repos/b", "/repos/c"})
    EXPECT_EQ(log.find(never), std::string::npos) << never;
  const std::string events = egress_events({"\"path\":\"/repos/d\"", "\"status\":421"});
  EXPECT_NE(events.find("\"path\":\"/admin\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"status\":421"), std::string::npos) << events;
  EXPECT_EQ(count(events, "egress:allow"), 2u) << events;
}

// The rule's identity goes on the one stream it applies to, never on the
// stream beside it, and the guest never sees it.
TEST_F(Http2Test, IdentityGoesOnItsStreamOnly) {
  auto r = curl(h2("-sv -d amount=500 https://api.stripe.com/v1/charges") + " --next " +
                h2("-sv https://api.github.com/repos/x") + " 2>&1");
  EXPECT_NE(r.output.find("HTTP/2 200"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sha256:" + sha256_hex(std::string("Bearer ") + kSecret)), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find(kSecret), std::string::npos);
  const std::string log = upstream_log();
  EXPECT_EQ(count(log, std::string("\"Bearer ") + kSecret + "\""), 1u) << log;
  EXPECT_NE(log.find("\"body\": \"amount=500\""), std::string::npos) << log;
  // The github request went without any Authorization.
  const size_t github = log.find("/repos/x");
  ASSERT_NE(github, std::string::npos) << log;
  const size_t line_start = log.rfind('\n', github);
  const std::string line = log.substr(line_start + 1, log.find('\n', github) - line_start - 1);
  EXPECT_EQ(line.find("Authorization"), std::string::npos) << line;
}

// nghttp (nghttp2's own client) fetching several paths at once on one
// connection: all answered, the denied one on its own stream.
TEST_F(Http2Test, ConcurrentStreamsFromNghttpAreAnsweredEachByItsRule) {
  auto r = guest(
      "nghttp -n -s --no-verify-peer https://api.github.com/repos/1 https://api.github.com/repos/2 "
      "https://api.github.com/admin https://api.github.com/repos/3 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, " 200 "), 3u) << r.output;
  EXPECT_EQ(count(r.output, " 403 "), 1u) << r.output;
}

// Bodies larger than HTTP/2's initial window, both ways: flow control
// carries them through the exchange whole.
TEST_F(Http2Test, LargeBodiesFlowBothWays) {
  auto r = curl(
      "--http2 -o /dev/null -w '%{http_version} %{size_download} %{http_code}' "
      "https://api.stripe.com/v1/bytes/3000000");
  EXPECT_EQ(r.output, "2 3000000 200");
  const std::string up = (dir_ / "upload.bin").string();
  std::ofstream(up, std::ios::binary) << std::string(400000, 'u');
  r = curl("--http2 -o /dev/null -w '%{http_version} %{http_code}' --data-binary @" + up +
           " https://api.stripe.com/v1/upload");
  EXPECT_EQ(r.output, "2 200");
  EXPECT_NE(upstream_log().find(std::string(1000, 'u')), std::string::npos);
}

// A secret the upstream reflects is scrubbed on the stream too.
TEST_F(Http2Test, AReflectedSecretIsScrubbedOnAStream) {
  auto r = curl("--http2 https://api.stripe.com/v1/reflect/chunked");
  EXPECT_EQ(r.output.find(kSecret), std::string::npos);
  EXPECT_NE(audit_events("secret:reflected", {"secret:reflected"}).find("secret:reflected"),
            std::string::npos);
}

// Rapid reset (CVE-2023-44487 pattern): streams opened and reset faster than
// any client does ends the connection with GOAWAY(ENHANCE_YOUR_CALM),
// audited. The positive control: a few resets, and the connection serves
// the next request.
TEST_F(Http2Test, RapidResetEndsTheConnection) {
  std::string out = raw_h2("reset", 20);
  std::cerr << egress_events() << std::endl;
  EXPECT_NE(out.find("status 200"), std::string::npos) << out;
  EXPECT_EQ(out.find("goaway"), std::string::npos) << out;
  out = raw_h2("reset", 400);
  EXPECT_NE(out.find("goaway 11"), std::string::npos) << out;  // ENHANCE_YOUR_CALM
  EXPECT_NE(egress_events({"http2 limit: peer_resets"}).find("http2 limit: peer_resets"), std::string::npos);
}

// Issue 32: rapid reset spread over connections, each under its own bound
// (200 per 10 s), is bounded per session (a burst of 400, then 20 a second):
// the connection that resets past it ends with GOAWAY(ENHANCE_YOUR_CALM),
// audited. The control: the first connection's 150 resets pass, and its
// request after them is answered. Up to eight more connections: the bucket
// refills 20 a second, so a slow machine needs more of them to trip it.
TEST_F(Http2Test, RapidResetSpreadOverConnectionsIsBoundedPerSession) {
  const std::string first = raw_h2("reset", 150);
  EXPECT_NE(first.find("status 200"), std::string::npos) << first;
  EXPECT_EQ(first.find("goaway"), std::string::npos) << first;
  std::string later;
  for (int i = 0; i < 8 && later.find("goaway 11") == std::string::npos; ++i) later = raw_h2("reset", 150);
  EXPECT_NE(later.find("goaway 11"), std::string::npos) << later;
  const std::string events = egress_events({"http2 limit: session_resets"});
  EXPECT_NE(events.find("http2 limit: session_resets"), std::string::npos) << events;
  EXPECT_EQ(events.find("http2 limit: peer_resets"), std::string::npos) << events;
}

TEST_F(Http2Test, PingAndContinuationFloodsEndTheConnection) {
  std::string out = raw_h2("ping", 5);
  EXPECT_NE(out.find("status 200"), std::string::npos) << out;
  out = raw_h2("ping", 500);
  EXPECT_NE(out.find("goaway 11"), std::string::npos) << out;
  out = raw_h2("cont", 3);
  EXPECT_NE(out.find("status 200"), std::string::npos) << out;
  out = raw_h2("cont", 200);
  EXPECT_NE(out.find("goaway 11"), std::string::npos) << out;
  const std::string events = egress_events({"http2 limit: ping_frames", "http2 limit: continuation_frames"});
  EXPECT_NE(events.find("http2 limit: ping_frames"), std::string::npos) << events;
  EXPECT_NE(events.find("http2 limit: continuation_frames"), std::string::npos) << events;
}

// Zerod's CPU time so far (user + system), in seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream fields(all.substr(all.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// HPACK bomb: one large field in the dynamic table referenced over and
// over. The connection's decoding budget (16 MiB) trips within the block:
// 5000 references (4 KB of block, 20 MB decoded) end with GOAWAY
// ENHANCE_YOUR_CALM, audited. A block of 240 KB (~1 GB decoded, ~0.44
// CPU-s before the budget) costs zerod little: its CPU is printed and
// bounded, and the guest still reads the GOAWAY (zerod drops what arrives
// after it for a moment rather than resetting). The positive control:
// large honest header blocks on one connection, the final request answered.
TEST_F(Http2Test, HpackBombEndsTheConnection) {
  std::string out = raw_h2("big", 20);
  EXPECT_NE(out.find("status 200"), std::string::npos) << out;
  EXPECT_EQ(out.find("goaway"), std::string::npos) << out;
  out = raw_h2("bomb", 5000);
  EXPECT_NE(out.find("goaway 11"), std::string::npos) << out;
  const double before = cpu_seconds(pid_);
  out = raw_h2("bomb", 240 * 1024);
  const double spent = cpu_seconds(pid_) - before;
  std::cout << "zerod CPU for a connection with a 240 KB HPACK bomb block: " << spent << " s" << std::endl;
  EXPECT_NE(out.find("goaway 11"), std::string::npos) << out;
  EXPECT_LT(spent, 0.2) << "before the budget, the block cost ~0.44 CPU-s";
  const std::string limit = "http2 limit: decoded_header_bytes";
  std::string events;
  for (int i = 0; i < 100 && count(events, limit) < 2; ++i) {
    if (i > 0) std::this_thread::sleep_for(50ms);  // the second connection's record is written as it closes
    events = egress_events({limit});
  }
  EXPECT_EQ(count(events, limit), 2u) << events;
}

// Cleartext HTTP/2 stays refused: prior knowledge on port 80 is not
// HTTP/1.1, and an h2c upgrade is a protocol upgrade. HTTP/1.1 on the same
// ports is the positive control.
TEST_F(Http2Test, CleartextHttp2IsRefused) {
  auto r = curl("--http2-prior-knowledge -o /dev/null -w '%{http_code}' http://api.github.com/repos/a");
  EXPECT_NE(r.output, "200") << r.output;
  r = curl("--http2 -w '%{http_code}' -o /dev/null http://api.github.com/repos/a");
  EXPECT_EQ(r.output, "403") << r.output;
  r = curl("--http1.1 -w '%{http_code}' -o /dev/null http://api.github.com/repos/a");
  EXPECT_EQ(r.output, "200") << r.output;
  r = curl("--http1.1 -w '%{http_version} %{http_code}' -o /dev/null https://api.github.com/repos/a");
  EXPECT_EQ(r.output, "1.1 200") << r.output;
}

}  // namespace
}  // namespace zn::test
