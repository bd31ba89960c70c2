#!/usr/bin/env python3
"""An HTTP(S) receiver for the audit sink tests: records every request and
answers as told.

  http_receiver.py DIR [CERT KEY]

Listens on 127.0.0.1 and an ephemeral port, written to DIR/port once
listening. Each request is recorded before it is answered: DIR/req-N.json
({"method","path","headers":[[name,value],...]}) and DIR/req-N.body (N from
1). The answer is read from DIR/answer.json on every request, default
{"status": 200}; keys: status, retry_after (a Retry-After header value),
body (text), echo_headers (append the request's headers to the body),
hang (seconds to wait before answering).
"""
import http.server
import json
import os
import ssl
import sys
import threading
import time

DIR = sys.argv[1]
lock = threading.Lock()
count = 0


def write_atomically(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real collector

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))

    def do_POST(self):
        global count
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        with lock:
            count += 1
            n = count
        write_atomically(os.path.join(DIR, "req-%d.body" % n), body)
        record = {"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()]}
        write_atomically(os.path.join(DIR, "req-%d.json" % n), json.dumps(record).encode())
        try:
            with open(os.path.join(DIR, "answer.json")) as f:
                answer = json.load(f)
        except FileNotFoundError:
            answer = {}
        if answer.get("hang"):
            time.sleep(answer["hang"])
        out = answer.get("body", "").encode()
        if answer.get("echo_headers"):
            out += b" " + str(self.headers).encode()
        self.send_response(answer.get("status", 200))
        if "retry_after" in answer:
            self.send_header("Retry-After", answer["retry_after"])
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
if len(sys.argv) == 4:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
write_atomically(os.path.join(DIR, "port"), str(server.server_address[1]).encode())
server.serve_forever()
