#!/usr/bin/python3
"""A WebSocket server for the lab's stand-in internet (python3-websockets, a
real RFC 6455 implementation): one connection per client, TLS when given a
certificate. It logs every handshake (path, request headers, negotiated
extensions) and every message it receives to LOG, one JSON line each.

  websocket_upstream.py ADDRESS PORT LOG [CERT KEY]

Messages (text):
  whoami      answers "auth:" + SHA-256 of the Authorization it was opened
              with (never the credential itself), or "auth:none"
  reflect     answers the Authorization verbatim, then base64 of it (a
              hostile upstream: the proxy must scrub both)
  split C..   answers the token of the Authorization (after the scheme) in
              pieces, one message each, cut at the offsets C.. ("split 5 20":
              three messages); "splitmiss C.." the same with the token's
              middle byte changed (a positive control: it must arrive as is)
  big N       answers N bytes of "x"
  frag N      answers N bytes of "y" as fragments of 1000 bytes
  close       closes with 4000 "bye"
anything else is echoed back, text or binary.
"""
import asyncio
import base64
import hashlib
import http
import json
import ssl
import sys

import websockets


def log(path, record):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


async def main():
    address, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    context = None
    if len(sys.argv) > 5:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[4], sys.argv[5])

    async def handler(ws):
        auth = ws.request_headers.get("Authorization", "")
        log(log_path, {"path": ws.path, "headers": list(ws.request_headers.raw_items()),
                       "extensions": [e.name for e in ws.extensions]})
        try:
            async for message in ws:
                text = message if isinstance(message, str) else None
                log(log_path, {"message": text if text is not None else "bin:%d" % len(message)})
                if text == "whoami":
                    await ws.send("auth:" + (hashlib.sha256(auth.encode()).hexdigest() if auth else "none"))
                elif text == "reflect":
                    await ws.send(auth)
                    await ws.send(base64.b64encode(auth.encode()).decode())
                elif text is not None and text.split(" ")[0] in ("split", "splitmiss"):
                    token = auth.split(" ", 1)[1] if " " in auth else auth
                    if text.startswith("splitmiss"):
                        mid = len(token) // 2
                        token = token[:mid] + ("q" if token[mid] != "q" else "r") + token[mid + 1:]
                    cuts = [0] + [int(c) for c in text.split(" ")[1:]] + [len(token)]
                    for a, b in zip(cuts, cuts[1:]):
                        await ws.send("<" + token[a:b] if a == 0 else token[a:b] + ">" if b == len(token)
                                      else token[a:b])
                elif text is not None and text.startswith("big "):
                    await ws.send("x" * int(text[4:]))
                elif text is not None and text.startswith("frag "):
                    n = int(text[5:])
                    await ws.send(["y" * min(1000, n - i) for i in range(0, n, 1000)])
                elif text == "close":
                    await ws.close(4000, "bye")
                else:
                    await ws.send(message)
        except websockets.ConnectionClosed:
            pass

    # A hostile upstream at .../bad101/<what>: a 101 the guest's key does
    # not check out against, or that names an extension nobody offered,
    # followed by bytes that look like an HTTP response.
    async def process_request(path, headers):
        if "/bad101/" not in path:
            return None
        fields = [("Upgrade", "websocket"), ("Connection", "Upgrade")]
        key = headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode())
                                  .digest()).decode()
        if path.endswith("/accept"):
            fields.append(("Sec-WebSocket-Accept", "bm90IHRoZSBhY2NlcHQ="))
        else:
            fields.append(("Sec-WebSocket-Accept", accept))
            fields.append(("Sec-WebSocket-Extensions", "permessage-deflate"))
        log(log_path, {"path": path, "bad101": True})
        return (http.HTTPStatus.SWITCHING_PROTOCOLS, fields, b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled")

    async with websockets.serve(handler, address, port, ssl=context, max_size=None, ping_interval=None,
                                process_request=process_request):
        await asyncio.Future()


asyncio.run(main())
