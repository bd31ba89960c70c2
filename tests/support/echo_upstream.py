#!/usr/bin/python3
"""A stand-in internet server for the lab: answers every request with what it
received (method, target, headers in order, body) as JSON, so tests can check
what reached the upstream: the injected identity, and nothing the guest was
not allowed to send. TLS when given a certificate.

Credentials are echoed only as a SHA-256 (the guest must never see an
identity, even reflected); the full request goes to the LOG file, one JSON
line each, for the test to read.

  echo_upstream.py ADDRESS PORT LOG [CERT KEY]

Special targets: .../bytes/N answers N bytes (chunked when ?chunked),
/status/N answers status N; .../reset-after answers, then resets the connection;
.../dies-mid-body sends 100000 of the 1000000 bytes it announced, then resets.

.../reflect/VARIANT is a hostile upstream that hands every request header back
(as httpbin's /headers, an error page or a redirect would), so tests can check
that zerod scrubs an injected secret from what the guest receives:
  cl        Content-Length body with every encoding (raw, JSON, HTML, URL,
            hex, base64 std/url at every alignment), written a few bytes at a time
  chunked   the same, chunked, chunk sizes 1..13 bytes, flushes and sleeps
  close     the same, HTTP/1.0 style: no length, ended by closing
  headers   302 with the secret in the reason phrase, Location (URL-encoded),
            Set-Cookie (raw), X-Echo-* (raw, base64) and a raw body
  html      400 error page quoting the request, HTML-escaped
  gzip      the cl body gzip-compressed, whatever Accept-Encoding said
  empty/N   status N (204, 304) reflecting in headers only, no body
  replay    the Authorization of the previous request this server saw (a
            response to a request that carried no secret itself)
  rule      the token in spellings no encoder list holds: percent-encoding
            with a pseudo-random subset escaped in mixed hex case, MIME
            base64 wrapped at 76 (CRLF) and 64 (LF) with a break inside the
            token, UTF-16LE with a BOM, quoted-printable with a soft break
            inside it; in the head an RFC 5987 filename* and an RFC 2231
            continuation (title*0*, title*1*)
  rule-miss the same with the token's middle byte changed (a positive
            control), and X-Body-Sha256: the body as sent
HEAD on any of them sends the head alone.

.../partial/VARIANT answers a part of a representation whatever was asked
(an upstream that chooses the cut itself): 206 (a 206 with Content-Range),
multi (206 multipart/byteranges), range200 (200 with a Content-Range); the
parts are of the request's headers as the raw reflection shows them.
"""
import base64
import gzip
import hashlib
import html
import json
import random
import socket
import ssl
import struct
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(self):
        body = self._body()
        path = self.path.split("?")[0]
        if "/reflect/" in path:
            self._log(body)
            self._reflect(path.split("/reflect/", 1)[1])
            return
        if "/partial/" in path:
            self._log(body)
            self._partial(path.split("/partial/", 1)[1])
            return
        if "/bytes/" in path:
            n = int(path.rsplit("/bytes/", 1)[1])
            payload = (b"z" * n)
            if "chunked" in self.path:
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, n, 8192):
                    part = payload[i:i + 8192]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
                return
            self._send(200, payload, "application/octet-stream")
            return
        if path.endswith("/dies-mid-body"):
            # An upstream that fails mid-response: a length it never reaches,
            # then a reset.
            self._log(body)
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"z" * 100000)
            self.wfile.flush()
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        status = int(path[len("/status/"):]) if path.startswith("/status/") else 200
        echo = dict(self._log(body))
        if path.endswith("/reset-after"):
            # Answers as if the connection stays open (no Connection: close),
            # then resets it: the proxy's next write on it fails.
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        echo["headers"] = [
            [k, "sha256:" + hashlib.sha256(v.encode()).hexdigest()]
            if k.lower() in ("authorization", "proxy-authorization") else [k, v]
            for k, v in self.headers.items()
        ]
        self._send(status, json.dumps(echo).encode(), "application/json")

    def _log(self, body):
        seen = {
            "method": self.command,
            "target": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("latin-1"),
            "server": self.server.server_address[0],
        }
        with open(self.server.log_path, "a") as log:
            log.write(json.dumps(seen) + "\n")
        if "/reflect/replay" not in self.path:
            self.server.last_auth = self.headers.get("Authorization", "")
        return seen

    def _partial(self, variant):
        whole = "".join("%s: %s\r\n" % (k, v) for k, v in self.headers.items()).encode()
        half = len(whole) // 2
        if variant == "multi":
            body = b""
            for start, end in ((0, half), (half, len(whole))):
                body += (b"--zn-parts\r\nContent-Type: text/plain\r\nContent-Range: bytes %d-%d/%d\r\n\r\n"
                         % (start, end - 1, len(whole))) + whole[start:end] + b"\r\n"
            body += b"--zn-parts--\r\n"
            self._send(206, body, "multipart/byteranges; boundary=zn-parts")
            return
        self.send_response(206 if variant == "206" else 200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Range", "bytes 0-%d/%d" % (half - 1, len(whole)))
        self.send_header("Content-Length", str(half))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(whole[:half])

    # --- hostile reflection -------------------------------------------------

    def _secrets(self):
        """Each header value, and for credentials the token after the scheme."""
        out = []
        for k, v in self.headers.items():
            out.append(v)
            if " " in v and k.lower() in ("authorization", "proxy-authorization"):
                out.append(v.split(" ", 1)[1])
        return out

    def _everything(self):
        """The request headers in every encoding an echoing server might use."""
        lines = "".join("%s: %s\r\n" % (k, v) for k, v in self.headers.items())
        parts = [
            "raw:\n" + lines,
            "httpbin:\n" + json.dumps({"headers": dict(self.headers.items())}, indent=2),
            "json-slash:\n" + json.dumps(dict(self.headers.items())).replace("/", "\\/"),
            "json-utf8:\n" + json.dumps(dict(self.headers.items()), ensure_ascii=False),
            "html:\n" + html.escape(lines),
            "url:\n" + urllib.parse.quote(lines, safe=""),
            "url-lower:\n" + "".join(
                c if c.isalnum() or c in "-._~" else "".join("%%%02x" % b for b in c.encode())
                for c in lines),
            "form:\n" + urllib.parse.urlencode(list(self.headers.items())),
            "b64:\n" + base64.b64encode(lines.encode()).decode(),
            "hex:\n" + lines.encode().hex(),
            "b64url:\n" + base64.urlsafe_b64encode(lines.encode()).decode().rstrip("="),
        ]
        for v in self._secrets():
            for prefix in ("user:", "u:", "ab:", ""):
                blob = (prefix + v).encode()
                parts.append("basic: Basic " + base64.b64encode(blob).decode())
                parts.append("b64url: " + base64.urlsafe_b64encode(blob).decode().rstrip("="))
        return ("\n".join(parts) + "\n").encode()

    def _dribble(self, data, framed):
        """Writes in pieces of 1..13 bytes (chunks when framed), flushing each
        and now and then pausing, so a match is split across TLS records,
        reads and chunk boundaries."""
        i, n = 0, 0
        while i < len(data):
            size = 1 + (n * 7) % 13
            part = data[i:i + size]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if framed else part)
            self.wfile.flush()
            if n % 97 == 0:
                time.sleep(0.003)
            i += size
            n += 1

    def _reflect(self, variant):
        head_only = self.command == "HEAD"
        auth = self.headers.get("Authorization", "")
        token = auth.split(" ", 1)[1] if " " in auth else auth
        if variant in ("cl", "gzip"):
            data = self._everything()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            if variant == "gzip":
                data = gzip.compress(data)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head_only:
                self._dribble(data, False)
        elif variant == "chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if not head_only:
                self._dribble(self._everything(), True)
                self.wfile.write(b"0\r\n\r\n")
        elif variant == "close":
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
            if not head_only:
                self._dribble(self._everything(), False)
            self.close_connection = True
            # The end of the body is the end of the connection: over TLS it
            # must be a clean one (close_notify), or it reads as a truncation.
            if isinstance(self.connection, ssl.SSLSocket):
                try:
                    self.connection.settimeout(2)
                    self.connection.unwrap()
                except (OSError, ValueError):
                    pass
        elif variant == "headers":
            data = "".join("%s: %s\n" % (k, v) for k, v in self.headers.items()).encode()
            self.send_response(302, "Found " + token)
            self.send_header("Location", "https://login.example/next?auth=" + urllib.parse.quote(auth, safe=""))
            self.send_header("Set-Cookie", "session=%s; Path=/; Secure" % token)
            self.send_header("X-Echo-Authorization", auth)
            self.send_header("X-Echo-B64", base64.b64encode(auth.encode()).decode())
            self.send_header("X-Echo-" + base64.urlsafe_b64encode(token.encode()).decode().rstrip("="), "1")
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head_only:
                self.wfile.write(data)
        elif variant == "html":
            lines = "".join("%s: %s\n" % (k, v) for k, v in self.headers.items())
            page = ("<!DOCTYPE html><html><head><title>400 Bad Request</title></head><body>"
                    "<h1>Bad Request</h1><p>Your request could not be understood:</p><pre>%s</pre>"
                    "<p>Token: <code>%s</code></p></body></html>" % (html.escape(lines), html.escape(token)))
            self._send(400, page.encode(), "text/html; charset=utf-8")
        elif variant in ("rule", "rule-miss"):
            self._rule(token, variant == "rule-miss")
        elif variant == "replay":
            self._send(200, ("previous Authorization: %s\n" % self.server.last_auth).encode(), "text/plain")
        elif variant.startswith("empty/"):
            self.send_response(int(variant[len("empty/"):]))
            self.send_header("X-Echo-Authorization", auth)
            self.send_header("Set-Cookie", "t=" + urllib.parse.quote(token, safe=""))
            self.end_headers()
        else:
            self._send(404, b"no such reflection\n", "text/plain")

    def _rule(self, token, miss):
        if miss:
            mid = len(token) // 2
            token = token[:mid] + ("q" if token[mid] != "q" else "r") + token[mid + 1:]
        rng = random.Random(len(token))

        def pct(t):
            return "".join("%%%02x" % b if rng.random() < 0.5 else "%%%02X" % b
                           if b == 0x25 or b >= 0x80 or rng.random() < 0.5 else chr(b)
                           for b in t.encode())

        def wrapped(blob, width, eol):
            b = base64.b64encode(blob).decode()
            return eol.join(b[i:i + width] for i in range(0, len(b), width)) + eol

        def qp(t):
            out = "".join("=%02X" % b if b == 0x3d or b >= 0x7f or b < 0x20 else chr(b) for b in t.encode())
            return out[:7] + "=\r\n" + out[7:]

        raw = token.encode()
        body = (b"pct-any:\n" + pct(token).encode() + b"\n"
                + b"mime76:\n" + wrapped(b"m" * 50 + raw + b" end", 76, "\r\n").encode()
                + b"mime64:\n" + wrapped(b"n" * 40 + raw + b" end", 64, "\n").encode()
                + b"utf16:\n" + b"\xff\xfe" + token.encode("utf-16-le") + b"\n"
                + b"qp:\n" + qp(token).encode() + b"\n")
        cut = len(token) // 2
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Disposition", "attachment; filename*=UTF-8''" + pct(token))
        self.send_header("X-Title", "x; title*0*=UTF-8''%s; title*1*=%s" % (pct(token[:cut]), pct(token[cut:])))
        if miss:
            self.send_header("X-Body-Sha256", hashlib.sha256(body).hexdigest())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self._dribble(body, False)

    def _send(self, status, payload, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _answer


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, port, log_path):
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.log_path = log_path
        self.last_auth = ""
        super().__init__((address, port), Echo)


def main():
    address, port = sys.argv[1], int(sys.argv[2])
    server = Server(address, port, sys.argv[3])
    if len(sys.argv) >= 6:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(sys.argv[4], sys.argv[5])
        ctx.set_alpn_protocols(["http/1.1"])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
