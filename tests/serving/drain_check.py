#!/usr/bin/env python3
"""`kiln serve`'s drain under clients that open a connection per request.

usage: drain_check.py KILN DEMO.onnx

16 closed-loop HTTP clients each open a connection, send one inference request, read the answer
and close, again and again. 1.5 s in, the server gets SIGTERM. Each client goes on until its
connection is refused (the server stopped listening) or 10 s have passed. Every outcome is
counted per client: 200, 503 (its response must say Connection: close), refused, and reset
(while connecting, or after the request was sent). Checked:
  - the server exits 0, within 3 s of the signal (once nothing admitted is left, not at the
    30 s drain timeout);
  - every client ends refused (the listener is closed, new connections are not reset);
  - at most one reset per client: the connection the kernel held in the listener's backlog (not
    yet accepted by kiln) when it closed; every connection kiln accepted gets an answer;
  - requests after the signal got 200 (admitted before it) or 503 with Connection: close (how
    many 503s depends on how soon the last admitted request finishes: often none).
"""
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import sigterm_under_load, start_server  # noqa: E402

CLIENTS = 16
BODY = json.dumps({"inputs": [{"name": "input", "shape": [1, 1, 28, 28], "datatype": "FP32",
                               "data": [0.0] * 784}]})


def client(port, stats, stop_at, signalled):
    while time.time() < stop_at:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.connect()
        except ConnectionRefusedError:
            stats["refused"] += 1
            return
        except ConnectionResetError:  # in the kernel's backlog when the listener closed
            stats["backlog_reset"] += 1
            continue
        try:
            conn.request("POST", "/v2/models/demo/infer", BODY,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                stats["after" if signalled.is_set() else "ok"] += 1
            elif r.status == 503:
                stats["503"] += 1
                if (r.getheader("Connection") or "").lower() != "close":
                    stats["503_keep_alive"] += 1
            else:
                stats["other"] += 1
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                socket.timeout, ConnectionAbortedError):
            stats["reset"] += 1
        finally:
            conn.close()


def main():
    kiln, demo = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp()
    repo = os.path.join(tmp, "demo.onnx")
    with open(demo, "rb") as f, open(repo, "wb") as g:
        g.write(f.read())
    proc, log, port, _ = start_server(kiln, repo, ["--threads", "1"], grpc=False, max_batch=8)
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/v2/health/ready")
            ready = c.getresponse().status == 200
            c.close()  # an idle keep-alive connection would hold the exit for its 1 s grace
            if ready:
                break
        except OSError:
            pass
        time.sleep(0.05)
    signalled = threading.Event()
    keys = ["ok", "after", "503", "503_keep_alive", "refused", "backlog_reset", "reset", "other"]
    stats = [dict.fromkeys(keys, 0) for _ in range(CLIENTS)]
    stop_at = time.time() + 11.5
    threads = [threading.Thread(target=client, args=(port, stats[i], stop_at, signalled))
               for i in range(CLIENTS)]
    rc, exit_s = sigterm_under_load(proc, threads, signalled, 1.5)
    total = {k: sum(s[k] for s in stats) for k in keys}
    log.seek(0)
    print(log.read())
    print(f"exit {rc} {exit_s:.2f} s after SIGTERM; totals {total}")
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    check(rc == 0, f"kiln serve exits 0 (rc {rc})")
    check(exit_s < 3.0, f"it exits once nothing admitted is left: {exit_s:.2f} s after SIGTERM")
    check(all(s["refused"] == 1 for s in stats),
          f"every client ends refused (not reset): {[s['refused'] for s in stats]}")
    # A connection whose handshake the kernel completed but kiln had not accepted when the
    # listener closed is reset by the kernel, while connecting or (connect() having returned)
    # after the request went out: at most one per client, the one it had open at that moment.
    per_client = [s["backlog_reset"] + s["reset"] for s in stats]
    check(max(per_client) <= 1, f"at most one connection per client reset: {per_client}")
    check(total["ok"] > 0, "200s before the drain")
    check(total["503_keep_alive"] == 0, "every 503 during the drain says Connection: close")
    check(total["other"] == 0, "no other status")
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
