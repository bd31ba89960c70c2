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
/status/N answers status N.
"""
import hashlib
import json
import socket
import ssl
import sys
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
        status = int(path[len("/status/"):]) if path.startswith("/status/") else 200
        seen = {
            "method": self.command,
            "target": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body": body.decode("latin-1"),
            "server": self.server.server_address[0],
        }
        with open(self.server.log_path, "a") as log:
            log.write(json.dumps(seen) + "\n")
        echo = dict(seen)
        echo["headers"] = [
            [k, "sha256:" + hashlib.sha256(v.encode()).hexdigest()]
            if k.lower() in ("authorization", "proxy-authorization") else [k, v]
            for k, v in self.headers.items()
        ]
        self._send(status, json.dumps(echo).encode(), "application/json")

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
