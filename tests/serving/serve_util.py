"""Starting `kiln serve` for the Python checks in this folder (standard library only)."""
import os
import subprocess
import sys
import tempfile
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
