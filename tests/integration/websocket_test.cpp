// WebSocket through interception (issue 17): a handshake is decided like any
// request (only a rule with "websocket": true allows it, the identity goes
// into it), then the frames are relayed both ways and never read as HTTP
// again. Real parts: python3-websockets as the guest's client and as the
// lab's upstream (ws.example, 198.18.0.14, TLS 443 and plain 80), and raw
// frames from the guest for what no library would send.
#include <openssl/evp.h>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

constexpr const char* kWsCanary = "AKIAZNCANARY00001";
constexpr int kMaxMessage = 65536;

// Hand-built frames from the guest: `raw_ws.py MODE CAFILE`; prints what
// came back, one line each ("status N", "text ...", "pong ...", "close N",
// "eof").
constexpr const char* kRawWs = R"py(import base64, os, socket, ssl, struct, sys, time
mode, cafile = sys.argv[1], sys.argv[2]
where = sys.argv[3] if len(sys.argv) > 3 else 'ws.example'
host, ip = {'ws.example': ('ws.example', '198.18.0.14'), 'ws6': ('ws.example', '2001:db8:18::14'),
            'api.github.com': ('api.github.com', '198.18.0.10')}[where]
ctx = ssl.create_default_context(cafile=cafile)
s = ctx.wrap_socket(socket.create_connection((ip, 443), timeout=10), server_hostname=host)
buf = b''

def handshake(path='/open/raw', key=None, upgrade='websocket', version='13', method='GET'):
    global buf
    key = key or base64.b64encode(os.urandom(16)).decode()
    s.sendall(('%s %s HTTP/1.1\r\nHost: %s\r\nUpgrade: %s\r\nConnection: Upgrade\r\n'
               'Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: %s\r\n\r\n'
               % (method, path, host, upgrade, key, version)).encode())
    head = b''
    while b'\r\n\r\n' not in head:
        d = s.recv(4096)
        if not d:
            break
        head += d
    status = head.split(b' ', 2)[1].decode() if head else 'none'
    print('status', status, flush=True)
    buf = head.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in head else b''
    return status

def frame(op, payload, fin=True, mask=True, rsv=0):
    n = len(payload)
    h = bytes([(0x80 if fin else 0) | rsv | op])
    m = 0x80 if mask else 0
    if n < 126:
        h += bytes([m | n])
    elif n < 65536:
        h += bytes([m | 126]) + struct.pack('!H', n)
    else:
        h += bytes([m | 127]) + struct.pack('!Q', n)
    if mask:
        k = os.urandom(4)
        h += k
        payload = bytes(b ^ k[i % 4] for i, b in enumerate(payload))
    return h + payload

def need(n):
    global buf
    while len(buf) < n:
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf += d

def read_frame():
    global buf
    need(2)
    b0, b1 = buf[0], buf[1]
    if b1 & 0x80:
        print('masked frame from the proxy', flush=True)
    n, off = b1 & 0x7f, 2
    if n == 126:
        need(4)
        n, off = struct.unpack('!H', buf[2:4])[0], 4
    elif n == 127:
        need(10)
        n, off = struct.unpack('!Q', buf[2:10])[0], 10
    need(off + n)
    payload, buf = buf[off:off + n], buf[off + n:]
    return b0 & 0x0f, bool(b0 & 0x80), payload

# Prints every message, pong and close until `count` lines or the end.
def show(count):
    message = b''
    try:
        while count > 0:
            op, fin, payload = read_frame()
            if op in (0, 1, 2):
                message += payload
                if fin:
                    print('text', message.decode(errors='replace'), flush=True)
                    message = b''
                    count -= 1
            elif op == 10:
                print('pong', payload.decode(), flush=True)
                count -= 1
            elif op == 8:
                print('close', struct.unpack('!H', payload[:2])[0] if len(payload) >= 2 else 0, flush=True)
                return
    except (EOFError, socket.timeout, OSError):
        print('eof', flush=True)

if mode == 'split':
    # One message a byte per write, then one in two fragments with a ping
    # between them: split reads and interleaved control frames.
    if handshake() == '101':
        for b in frame(1, b'hello split world'):
            s.sendall(bytes([b]))
            time.sleep(0.002)
        s.sendall(frame(1, b'frag-', fin=False) + frame(9, b'p1') + frame(0, b'ment'))
        show(3)
elif mode in ('unmasked', 'rsv', 'http', 'continuation', 'bigping', 'pingcanary', 'splitcanary', 'tail'):
    if handshake() == '101':
        s.sendall(frame(1, b'before'))
        show(1)
        bad = {
            'unmasked': frame(1, b'unmasked-msg', mask=False),
            'rsv': frame(1, b'rsv-msg', rsv=0x40),
            'http': b'GET /smuggled HTTP/1.1\r\nHost: ws.example\r\n\r\n',
            'continuation': frame(0, b'orphan-msg'),
            'bigping': frame(9, b'p' * 126),
            'pingcanary': frame(9, b'AKIAZNCANARY00001'),
            'splitcanary': frame(1, b'key=AKIAZNCAN', fin=False) + frame(0, b'ARY00001 end'),
            # Frames are re-made by the proxy: a valid one after garbage in
            # the same write is never relayed.
            'tail': frame(1, b'tail-1', rsv=0x20) + frame(1, b'tail-2'),
        }[mode]
        s.sendall(bad)
        show(2)
else:
    # A handshake alone, one field of it changed.
    handshake(**{'badkey': {'key': 'abc'}, 'version8': {'version': '8'}, 'upgradelist': {'upgrade': 'websocket, h2c'},
                 'post': {'method': 'POST'}, 'noswitch': {'path': '/ws/echo'}, 'plain': {'path': '/plain/raw'}}[mode])
)py";

// WebSocket over HTTP/2 (RFC 8441) from the guest: python3-h2 for the
// connection, python3-wsproto for the frames. `h2_ws.py PATH CAFILE MSG...`
// opens an extended CONNECT to PATH, sends each message and prints the echo;
// after the first, a GET /plain/x on a stream beside it; then a Close.
constexpr const char* kH2Ws = R"py(import socket, ssl, sys
import h2.config, h2.connection, h2.events
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, Message, TextMessage
path, cafile, messages = sys.argv[1], sys.argv[2], sys.argv[3:]
ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(['h2'])
s = ctx.wrap_socket(socket.create_connection(('198.18.0.14', 443), timeout=10), server_hostname='ws.example')
print('alpn', s.selected_alpn_protocol(), flush=True)
c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding='utf-8'))
c.initiate_connection()
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

def take(kind, sid):
    while True:
        for i, e in enumerate(events):
            if isinstance(e, kind) and getattr(e, 'stream_id', None) == sid:
                return events.pop(i)
            if isinstance(e, h2.events.StreamReset) and e.stream_id == sid:
                events.pop(i)
                return None
        pump()

while not any(isinstance(e, h2.events.RemoteSettingsChanged) for e in events):
    pump()
print('connect-protocol', c.remote_settings.enable_connect_protocol, flush=True)
sid = c.get_next_available_stream_id()
c.send_headers(sid, [(':method', 'CONNECT'), (':protocol', 'websocket'), (':scheme', 'https'),
                     (':path', path), (':authority', 'ws.example'), ('sec-websocket-version', '13')])
s.sendall(c.data_to_send())
r = take(h2.events.ResponseReceived, sid)
status = dict(r.headers)[':status'] if r else 'reset'
print('status', status, flush=True)
if status != '200':
    sys.exit(0)
ws = Connection(ConnectionType.CLIENT)
pending = []

def ws_event():
    while not pending:
        d = take(h2.events.DataReceived, sid)
        if d is None:
            return None
        c.acknowledge_received_data(d.flow_controlled_length, sid)
        s.sendall(c.data_to_send())
        ws.receive_data(d.data)
        pending.extend(ws.events())
    return pending.pop(0)

for n, m in enumerate(messages):
    c.send_data(sid, ws.send(Message(data=m)))
    s.sendall(c.data_to_send())
    e = ws_event()
    print('recv:', e.data if isinstance(e, TextMessage) else e, flush=True)
    if n == 0:
        gid = c.get_next_available_stream_id()
        c.send_headers(gid, [(':method', 'GET'), (':scheme', 'https'), (':path', '/plain/x'),
                             (':authority', 'ws.example')], end_stream=True)
        s.sendall(c.data_to_send())
        g = take(h2.events.ResponseReceived, gid)
        print('get', dict(g.headers)[':status'] if g else 'reset', flush=True)
c.send_data(sid, ws.send(CloseConnection(code=1000)))
s.sendall(c.data_to_send())
e = ws_event()
print('closed', e.code if isinstance(e, CloseConnection) else e, flush=True)
)py";

class WebSocketTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    issue_upstream_cert("ws.example");
    config["dns_static"]["ws.example"] = {"198.18.0.14", "2001:db8:18::14"};
    config["proxy_websocket_idle_timeout_ms"] = 3000;
    config["proxy_websocket_max_message"] = kMaxMessage;
    // The python3-websockets client and the raw frames offer no ALPN (they
    // speak HTTP/1.1); h2_ws.py offers h2.
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string inet = lab_->inet_netns();
    ASSERT_EQ(run_in_netns(inet, "ip addr add 198.18.0.14/32 dev lo").exit_code, 0);
    ASSERT_EQ(run_in_netns(inet, "ip -6 addr add 2001:db8:18::14/128 dev lo nodad").exit_code, 0);
    for (const char* at : {"198.18.0.14 443", "198.18.0.14 80", "2001:db8:18::14 443"}) {
      const std::string where = at;
      const std::string address = where.substr(0, where.find(' ')), port = where.substr(where.find(' ') + 1);
      std::vector<std::string> argv = {"/usr/bin/python3", ZN_WEBSOCKET_UPSTREAM, address, port,
                                       p("ws-upstream.log")};
      if (port == "443") {
        argv.push_back(p("ws.example.pem"));
        argv.push_back(p("ws.example.key"));
      }
      servers_.push_back(spawn_in_inet(argv));
    }
    for (const char* target : {"198.18.0.14 443", "198.18.0.14 80", "2001:db8:18::14 443"})
      ASSERT_TRUE(inet_accepts(target)) << target << " never accepted";
    json r = call("session.update", {{"id", "user-1"}, {"policy", ws_policy()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    ASSERT_EQ(dig("ws.example"), "198.18.0.14\n");
    ASSERT_EQ(guest("dig @8.8.8.8 ws.example AAAA +short +tries=1 +time=2").output, "2001:db8:18::14\n");
    std::ofstream(dir_ / "raw_ws.py") << kRawWs;
    std::ofstream(dir_ / "h2_ws.py") << kH2Ws;
  }
  static std::string ws_policy() {
    return std::string(R"({"policy":{"allow":[
        {"host":"ws.example","paths":["/ws/**"],"websocket":true,"identity":"cap:stripe"},
        {"host":"ws.example","paths":["/open/**"],"websocket":true},
        {"host":"ws.example","paths":["/plain/**"]},
        {"host":"api.github.com","paths":["/ws/**"],"websocket":true}]},
      "resources":{"stripe":{"accessToken":")") +
           kSecret + R"("}},
      "canaries":[")" +
           kWsCanary + R"("]})";
  }
  // The python3-websockets client in the guest; its lines.
  std::string ws(const std::string& url, const std::string& steps) {
    return guest("timeout 40 /usr/bin/python3 " ZN_WEBSOCKET_CLIENT " " + url + " " + p("guest-trust.pem") +
                 " " + steps + " 2>&1")
        .output;
  }
  std::string raw_ws(const std::string& mode, const std::string& host = "ws.example") {
    return guest("timeout 30 python3 " + (dir_ / "raw_ws.py").string() + " " + mode + " " +
                 p("guest-trust.pem") + " " + host + " 2>&1")
        .output;
  }
  std::string h2_ws(const std::string& path, const std::string& messages) {
    return guest("timeout 30 /usr/bin/python3 " + (dir_ / "h2_ws.py").string() + " " + path + " " +
                 p("guest-trust.pem") + " " + messages + " 2>&1")
        .output;
  }
  std::string ws_log() const { return slurp(pki_ / "ws-upstream.log"); }
  // raw_ws("split"): the messages echoed in order, and the pong. The pong
  // is its own line anywhere among them: the upstream's WebSocket library
  // answers a ping as it reads it, its echo of the messages comes from the
  // application, and under load either can be written first (seen in a
  // TSan run beside a CPU hog).
  std::string raw_ws_split(const std::string& host = "ws.example") {
    std::string r = raw_ws("split", host);
    const size_t pong = r.find("pong p1\n");
    if (pong == std::string::npos) return r + "(no pong)";
    return r.erase(pong, std::string_view("pong p1\n").size());
  }
};

// A rule with "websocket": true lets the handshake through with the rule's
// identity and relays messages both ways; the same host's rule without it
// refuses the handshake (403) before anything reaches the upstream.
TEST_F(WebSocketTest, AllowedByItsRuleAndRefusedWithoutIt) {
  const std::string r = ws("wss://ws.example/ws/chat", "send:hello recv send:whoami recv close");
  EXPECT_EQ(r, "recv: hello\nrecv: auth:" + sha256_hex(std::string("Bearer ") + kSecret) + "\n") << r;
  EXPECT_EQ(ws("wss://ws.example/plain/chat", "send:x recv"), "refused: 403\n");
  const std::string log = ws_log();
  EXPECT_NE(log.find("\"path\": \"/ws/chat\""), std::string::npos) << log;
  EXPECT_EQ(log.find("/plain/"), std::string::npos) << log;
  // The client offered permessage-deflate: the proxy never lets an
  // extension be negotiated (a compressed payload could not be screened).
  EXPECT_NE(log.find("\"extensions\": []"), std::string::npos) << log;
  EXPECT_EQ(log.find("permessage-deflate"), std::string::npos) << log;
  const std::string events = egress_events({"\"status\":101", "websocket not allowed"});
  EXPECT_NE(events.find("\"messages_up\":2"), std::string::npos) << events;
  EXPECT_NE(events.find("\"messages_down\":2"), std::string::npos) << events;
  EXPECT_NE(events.find("\"identity\":\"stripe\""), std::string::npos) << events;
  EXPECT_NE(events.find("websocket not allowed"), std::string::npos) << events;
  EXPECT_EQ(events.find(kSecret), std::string::npos);
}

// ws:// on port 80 is intercepted the same way; an identity is never sent
// over cleartext, so the identity rule's handshake is refused there.
TEST_F(WebSocketTest, CleartextWebSocketWithoutIdentity) {
  EXPECT_EQ(ws("ws://ws.example/open/x", "send:plain recv close"), "recv: plain\n");
  EXPECT_EQ(ws("ws://ws.example/ws/x", "send:x recv"), "refused: 403\n");
  EXPECT_EQ(ws_log().find("/ws/x"), std::string::npos);
}

// The upstream hands the injected credential back in a message, raw and in
// base64: the guest gets neither, the audit says it was scrubbed.
TEST_F(WebSocketTest, AReflectedSecretIsScrubbedFromMessages) {
  const std::string r = ws("wss://ws.example/ws/r", "send:reflect recv recv send:after recv close");
  EXPECT_EQ(count(r, "recv: "), 3u) << r;
  EXPECT_NE(r.find("recv: after"), std::string::npos) << r;
  EXPECT_EQ(r.find(kSecret), std::string::npos) << r;
  const std::string b64 = [] {
    const std::string in = std::string("Bearer ") + kSecret;
    std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
    out.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                                   reinterpret_cast<const unsigned char*>(in.data()),
                                                   static_cast<int>(in.size()))));
    return out;
  }();
  EXPECT_EQ(r.find(b64.substr(8, 24)), std::string::npos) << r;
  EXPECT_NE(audit_events("secret:reflected", {"secret:reflected"}).find("secret:reflected"),
            std::string::npos);
}

// The upstream hands the credential back cut into 2 or 3 messages (issue
// 30): the scrubber reads a direction's messages as one stream, so the
// pieces are redacted from the first piece long enough to guess no better
// than the whole (SecretScrubber::boundary_redaction) on; the guest never
// gets 12 bytes of it in a row. Positive control: the same cuts of a token
// with one byte changed arrive verbatim.
TEST_F(WebSocketTest, ASecretSplitAcrossMessagesNeverArrivesWhole) {
  const std::vector<std::string> cuts = {"5", "11", "12", "20", "28", "3\\ 15", "10\\ 20", "11\\ 23"};
  std::string steps;
  size_t expected = 0;
  for (const std::string& c : cuts) {
    steps += "send:split\\ " + c + " recv recv " + (c.find(' ') != std::string::npos ? "recv " : "");
    expected += c.find(' ') != std::string::npos ? 3 : 2;
  }
  const std::string r = ws("wss://ws.example/ws/s", steps + "close");
  EXPECT_EQ(count(r, "recv: "), expected) << r;
  std::string got;  // the messages' text, joined
  std::istringstream lines(r);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("recv: ", 0) == 0) got += line.substr(6);
  const std::string secret = kSecret;
  for (size_t k = 0; k + 12 <= secret.size(); ++k)
    EXPECT_EQ(got.find(secret.substr(k, 12)), std::string::npos) << secret.substr(k, 12) << "\n" << r;
  EXPECT_NE(got.find("zn-redacted"), std::string::npos) << r;
  EXPECT_GE(count(ws_log(), "\"message\": \"split"), cuts.size());

  std::string miss = secret;
  miss[miss.size() / 2] = miss[miss.size() / 2] == 'q' ? 'r' : 'q';
  const std::string m = ws("wss://ws.example/ws/s",
                           "send:splitmiss\\ 11 recv recv send:splitmiss\\ 3\\ 15 recv recv recv close");
  EXPECT_EQ(m, "recv: <" + miss.substr(0, 11) + "\nrecv: " + miss.substr(11) + ">\nrecv: <" +
                   miss.substr(0, 3) + "\nrecv: " + miss.substr(3, 12) + "\nrecv: " + miss.substr(15) +
                   ">\n");
}

// A canary the guest cuts over two messages: the first piece goes (a message
// is delivered at its end), the one that completes it ends the WebSocket
// (1008) and never reaches the upstream. Positive control: a near miss cut
// the same way goes through.
TEST_F(WebSocketTest, ACanarySplitAcrossGuestMessagesEndsTheWebSocket) {
  const std::string canary = kWsCanary;
  const std::string head = canary.substr(0, 7), tail = canary.substr(7);
  EXPECT_EQ(ws("wss://ws.example/open/t", "send:key=" + head + " recv send:" + tail + " recv"),
            "recv: key=" + head + "\nclosed: 1008 zeroness\n");
  EXPECT_EQ(ws_log().find(tail), std::string::npos);
  const std::string near = tail.substr(0, tail.size() - 1) + (tail.back() == '9' ? "8" : "9");
  EXPECT_EQ(ws("wss://ws.example/open/t", "send:key=" + head + " recv send:" + near + " recv close"),
            "recv: key=" + head + "\nrecv: " + near + "\n");
}

// Messages up to the limit pass both ways, fragmented or not; one past it
// ends the WebSocket with 1009 to the side that sent it.
TEST_F(WebSocketTest, MessageSizeIsBounded) {
  const std::string n = std::to_string(kMaxMessage - 100);
  EXPECT_EQ(ws("wss://ws.example/open/big", "sendbin:" + n + " recv close"), "recv: bin:" + n + "\n");
  EXPECT_EQ(ws("wss://ws.example/open/big", "send:big\\ " + n + " recv send:frag\\ " + n + " recv close"),
            "recv: " + std::string(kMaxMessage - 100, 'x') +
                "\nrecv: " + std::string(kMaxMessage - 100, 'y') + "\n");
  const std::string over = std::to_string(kMaxMessage + 100);
  EXPECT_EQ(ws("wss://ws.example/open/big", "sendbin:" + over + " recv"), "closed: 1009 zeroness\n");
  // The upstream's message past the limit: the guest is told the proxy went
  // away (1001); the upstream got the 1009.
  EXPECT_EQ(ws("wss://ws.example/open/big", "send:big\\ " + over + " recv"), "closed: 1001 zeroness\n");
  const std::string events = egress_events({"message over the size limit"});
  EXPECT_NE(events.find("guest: a message over the size limit"), std::string::npos) << events;
  EXPECT_NE(events.find("upstream: a message over the size limit"), std::string::npos) << events;
}

// A canary in a message, a fragmented message or a ping ends the WebSocket
// (1008) before it leaves; the same connection's clean message went.
TEST_F(WebSocketTest, ATripwireInAFrameEndsTheWebSocket) {
  EXPECT_EQ(ws("wss://ws.example/open/t", std::string("send:clean recv send:key=") + kWsCanary + " recv"),
            "recv: clean\nclosed: 1008 zeroness\n");
  for (const char* mode : {"pingcanary", "splitcanary"}) {
    const std::string r = raw_ws(mode);
    EXPECT_EQ(r, "status 101\ntext before\nclose 1008\n") << mode;
  }
  const std::string log = ws_log();
  EXPECT_NE(log.find("\"message\": \"clean\""), std::string::npos) << log;
  EXPECT_EQ(log.find("AKIAZNCAN"), std::string::npos) << log;
  const std::string alarms = audit_events("secret:canary", {"secret:canary"});
  EXPECT_NE(alarms.find("\"websocket\""), std::string::npos) << alarms;
}

// Frames no valid client sends end the WebSocket with 1002, and nothing of
// them (nor anything behind them) reaches the upstream; bytes after the
// handshake are never read as an HTTP request. Positive control: a message
// written a byte at a time and one fragmented around a ping arrive whole.
TEST_F(WebSocketTest, MalformedFramesEndTheWebSocket) {
  EXPECT_EQ(raw_ws_split(), "status 101\ntext hello split world\ntext frag-ment\n");
  for (const char* mode : {"unmasked", "rsv", "http", "continuation", "bigping", "tail"}) {
    const std::string r = raw_ws(mode);
    EXPECT_EQ(r, "status 101\ntext before\nclose 1002\n") << mode;
  }
  const std::string log = ws_log();
  for (const char* never : {"unmasked-msg", "rsv-msg", "smuggled", "orphan-msg", "tail-1", "tail-2"})
    EXPECT_EQ(log.find(never), std::string::npos) << never << "\n" << log;
  EXPECT_EQ(upstream_log().find("smuggled"), std::string::npos);
}

// The same over IPv6 from the guest: relayed with a rule, refused without.
TEST_F(WebSocketTest, OverIpv6) {
  EXPECT_EQ(raw_ws_split("ws6"), "status 101\ntext hello split world\ntext frag-ment\n");
  EXPECT_EQ(raw_ws("plain", "ws6"), "status 403\n");
  EXPECT_EQ(raw_ws("unmasked", "ws6"), "status 101\ntext before\nclose 1002\n");
  EXPECT_EQ(ws_log().find("/plain/"), std::string::npos);
}

// Handshakes that are not exactly WebSocket's are refused before policy;
// an upstream that answers the upgrade as a request is relayed as one.
TEST_F(WebSocketTest, HandshakesAreChecked) {
  EXPECT_EQ(raw_ws("badkey"), "status 400\n");
  EXPECT_EQ(raw_ws("version8"), "status 400\n");
  EXPECT_EQ(raw_ws("upgradelist"), "status 400\n");
  EXPECT_EQ(raw_ws("post"), "status 400\n");
  EXPECT_EQ(ws_log().find("/open/raw"), std::string::npos);
  // An upstream whose 101 does not check out (another key's accept, an
  // extension nobody offered): 502, and nothing after its head reaches the
  // guest. The same upstream's valid 101 passes (MalformedFrames' "split").
  for (const char* bad : {"/open/bad101/accept", "/open/bad101/extension"}) {
    EXPECT_EQ(ws(std::string("wss://ws.example") + bad, "send:x recv"), "refused: 502\n") << bad;
    EXPECT_NE(ws_log().find(bad), std::string::npos) << bad;
  }
  // The echo upstream does not speak WebSocket: its 200 goes to the guest.
  ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
  EXPECT_EQ(raw_ws("noswitch", "api.github.com"), "status 200\n");
  EXPECT_NE(upstream_log().find("/ws/echo"), std::string::npos);
}

// No byte either way for the idle limit (3 s here): both sides get 1001.
// Positive control: a WebSocket used every second outlives the limit.
TEST_F(WebSocketTest, AnIdleWebSocketIsClosed) {
  EXPECT_EQ(ws("wss://ws.example/open/idle",
               "send:a recv sleep:1.5 send:b recv sleep:1.5 send:c recv sleep:1.5 "
               "send:d recv close"),
            "recv: a\nrecv: b\nrecv: c\nrecv: d\n");
  EXPECT_EQ(ws("wss://ws.example/open/idle", "send:a recv wait"), "recv: a\nclosed: 1001 zeroness\n");
  const std::string events = egress_events({"\"end\":\"idle\""});
  EXPECT_NE(events.find("\"end\":\"idle\""), std::string::npos) << events;
}

// RFC 8441: a WebSocket on an HTTP/2 stream (extended CONNECT), decided by
// the same rules (identity injected into the upstream's HTTP/1.1 handshake),
// beside an ordinary request on the same connection; refused (403) on its
// stream where no rule allows it.
TEST_F(WebSocketTest, OverHttp2WithExtendedConnect) {
  const std::string r = h2_ws("/ws/h2", "hello whoami");
  // The GET reached the upstream, which answers plain requests 426.
  EXPECT_EQ(r, "alpn h2\nconnect-protocol 1\nstatus 200\nrecv: hello\nget 426\nrecv: auth:" +
                   sha256_hex(std::string("Bearer ") + kSecret) + "\nclosed 1000\n")
      << r;
  EXPECT_EQ(h2_ws("/plain/h2", "x"), "alpn h2\nconnect-protocol 1\nstatus 403\n");
  const std::string log = ws_log();
  EXPECT_NE(log.find("\"path\": \"/ws/h2\""), std::string::npos) << log;
  EXPECT_EQ(log.find("/plain/h2"), std::string::npos) << log;
  const std::string events = egress_events({"\"path\":\"/ws/h2\"", "\"path\":\"/plain/h2\""});
  EXPECT_NE(events.find("\"messages_up\":2"), std::string::npos) << events;
}

}  // namespace
}  // namespace zn::test
