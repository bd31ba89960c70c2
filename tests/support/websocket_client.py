#!/usr/bin/python3
"""A WebSocket client for lab guests (python3-websockets): opens URL, runs the
steps in order and prints what happened, one line each:
  recv: <text>  |  recv: bin:<len>  |  closed: <code> <reason>  |  refused: <status>

  websocket_client.py URL CAFILE STEP...

Steps: send:TEXT, sendbin:N, recv, sleep:SECONDS, close, wait (until the
server closes), many:N (N echo round trips, prints "many: ok").
Exit 0 when every step ran, 2 when the handshake was refused, 3 when the
connection closed before the steps were done.
"""
import asyncio
import ssl
import sys

import websockets


async def main():
    url, cafile, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    context = None
    if url.startswith("wss:"):
        context = ssl.create_default_context(cafile=cafile)
    try:
        ws = await websockets.connect(url, ssl=context, max_size=None, ping_interval=None, open_timeout=10)
    except websockets.InvalidStatusCode as e:
        print("refused: %d" % e.status_code, flush=True)
        return 2
    try:
        for step in steps:
            if step.startswith("send:"):
                await ws.send(step[5:])
            elif step.startswith("sendbin:"):
                await ws.send(b"\x00\xff" * (int(step[8:]) // 2))
            elif step == "recv":
                message = await asyncio.wait_for(ws.recv(), 10)
                print("recv: " + (message if isinstance(message, str) else "bin:%d" % len(message)), flush=True)
            elif step.startswith("sleep:"):
                await asyncio.sleep(float(step[6:]))
            elif step.startswith("many:"):
                for i in range(int(step[5:])):
                    await ws.send("m%d" % i)
                    if await asyncio.wait_for(ws.recv(), 10) != "m%d" % i:
                        raise RuntimeError("echo mismatch")
                print("many: ok", flush=True)
            elif step == "close":
                await ws.close()
            elif step == "wait":
                await asyncio.wait_for(ws.wait_closed(), 30)
                print("closed: %s %s" % (ws.close_code, ws.close_reason), flush=True)
        await ws.close()
        return 0
    except websockets.ConnectionClosed as e:
        print("closed: %s %s" % (e.code, e.reason), flush=True)
        return 3


sys.exit(asyncio.run(main()))
