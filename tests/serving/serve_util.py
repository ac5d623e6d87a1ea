"""Starting `kiln serve` for the Python checks in this folder (standard library only)."""
import os
import subprocess
import sys
import tempfile
import threading
import time


def start_server(kiln, model, extra=(), grpc=True, max_batch=16):
    """kiln serve MODEL on 127.0.0.1, any free ports; returns (process, log file, HTTP port,
    gRPC port or -1) once it listens (exits with the log when it does not start in 60 s)."""
    tmp = tempfile.mkdtemp()
    port_file = os.path.join(tmp, "ports")
    log = open(os.path.join(tmp, "serve.log"), "w+")
    proc = subprocess.Popen([kiln, "serve", model, "--host", "127.0.0.1", "--http-port", "0",
                             "--grpc-port", "0" if grpc else "-1", "--port-file", port_file,
                             "--max-batch", str(max_batch), *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.time() > deadline:
            log.seek(0)
            sys.exit("kiln serve did not start:\n" + log.read())
        time.sleep(0.05)
    http_port, grpc_port = [int(x) for x in open(port_file).read().split()]
    return proc, log, http_port, grpc_port


class ClientThreads:
    """Closed-loop client threads (their loop() counts into ok and errors under lock) that
    take() drains and close() stops."""

    def __init__(self):
        self.ok = 0
        self.errors = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = []

    def start(self, n):
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def take(self):
        """(successes, errors) since the last take."""
        with self.lock:
            r = (self.ok, self.errors)
            self.ok, self.errors = 0, []
        return r

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def sigterm_under_load(proc, threads, signalled, load_s):
    """Starts `threads`, lets them load the server for `load_s`, sets `signalled` and sends SIGTERM;
    returns (exit status, seconds from SIGTERM to exit) once the server and the threads ended."""
    import signal
    for t in threads:
        t.start()
    time.sleep(load_s)
    signalled.set()
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=60)
    exit_s = time.time() - t0
    for t in threads:
        t.join()
    return rc, exit_s
