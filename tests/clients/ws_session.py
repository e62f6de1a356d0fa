"""A WebSocket session with trident's /invocations-bidirectional-stream, driven by a script, with
the `websockets` package (a client that shares no code with the server).

Usage: python ws_session.py URL < script.json
The script: {"headers": {...}, "steps": [step, ...]}; a step is one of
  {"text": "..."}            send a text message
  {"binary": "<hex>"}        send a binary message
  {"burst": N, "text": "..."} send the text message N times without waiting
  {"ping": "..."}            send a ping and wait for its pong
  {"recv": N}                receive N messages
  {"until_close": true}      receive until the server closes
Prints one JSON object: "received" (text messages as strings, binary ones as {"binary": hex}),
"pongs", "close" ({"code", "reason"} of the server's close frame, or null), or "refused" (the
handshake's HTTP status) and "error".
"""

import json
import sys

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect


def message(data):
    return data if isinstance(data, str) else {"binary": data.hex()}


def main():
    url = sys.argv[1]
    script = json.load(sys.stdin)
    out = {"received": [], "pongs": 0, "close": None}
    try:
        socket = connect(url, additional_headers=script.get("headers", {}), max_size=None, open_timeout=10)
    except InvalidStatus as error:
        out["refused"] = error.response.status_code
        out["error"] = error.response.body.decode("utf-8", "replace")
        print(json.dumps(out))
        return
    with socket:
        try:
            for step in script["steps"]:
                if "text" in step and "burst" not in step:
                    socket.send(step["text"])
                elif "binary" in step:
                    socket.send(bytes.fromhex(step["binary"]))
                elif "burst" in step:
                    for _ in range(step["burst"]):
                        socket.send(step["text"])
                elif "ping" in step:
                    if socket.ping(step["ping"].encode()).wait(10):
                        out["pongs"] += 1
                elif "recv" in step:
                    for _ in range(step["recv"]):
                        out["received"].append(message(socket.recv(timeout=30)))
                elif "until_close" in step:
                    while True:
                        out["received"].append(message(socket.recv(timeout=30)))
        except ConnectionClosed as closed:
            # The server may close while a step still sends (a burst past the message rate):
            # what it answered before its close frame is still queued here, and is received.
            while True:
                try:
                    out["received"].append(message(socket.recv(timeout=0)))
                except (ConnectionClosed, TimeoutError):
                    break
            if closed.rcvd is not None:
                out["close"] = {"code": closed.rcvd.code, "reason": closed.rcvd.reason}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
