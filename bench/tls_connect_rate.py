#!/usr/bin/env python3
"""New TLS connections per second from one client, each carrying one HTTP/1.1
request (GET PATH, Connection: close) read to its end: the cost a guest pays
for a connection it did not keep alive. Python's ssl module (OpenSSL) with
SNI and verification, like any guest's client.

usage: tls_connect_rate.py HOST PORT PATH SECONDS CAFILE full|resumed|resumed-tls1.2

full: every connection a full handshake (no session offered).
resumed: each connection offers the session the previous one was given
(TLS 1.3 tickets arrive after the handshake, hence the read to the end).
resumed-tls1.2: the same at most TLS 1.2, whose abbreviated handshake ends
with the client's Finished (the server's ACK of it is what lets a client with
Nagle on send its request).
The name is resolved once, before the first connection, as by a client with
a resolver cache: a lookup per connection measured the guest's DNS (zerod's
answers, against a peer guest's local hosts file) under the handshake's name;
name resolution is in the latency part (bench/sections/interception.sh).
Prints "<connections/s> <connections> <resumed> <failed>"; exits 1 when
any connection failed or answered other than 200.
"""
import socket
import ssl
import sys
import time

MODES = ("full", "resumed", "resumed-tls1.2")


def main() -> int:
    if len(sys.argv) != 7 or sys.argv[6] not in MODES:
        print(__doc__, file=sys.stderr)
        return 2
    host, port, path, seconds, cafile, mode = sys.argv[1:]
    port, seconds = int(port), float(seconds)
    ctx = ssl.create_default_context(cafile=cafile)
    if mode == "resumed-tls1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    resuming = mode != "full"
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    address = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    session = None
    done = resumed = failed = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            with socket.create_connection(address, timeout=10) as raw:
                with ctx.wrap_socket(raw, server_hostname=host,
                                     session=session if resuming else None) as tls:
                    tls.sendall(request)
                    answer = b""
                    while chunk := tls.recv(65536):
                        answer += chunk
                    if not answer.startswith(b"HTTP/1.1 200"):
                        failed += 1
                    resumed += tls.session_reused
                    if resuming:
                        session = tls.session
        except (OSError, ssl.SSLError):
            failed += 1
        done += 1
    elapsed = time.monotonic() - start
    print(f"{done / elapsed:.1f} {done} {resumed} {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
