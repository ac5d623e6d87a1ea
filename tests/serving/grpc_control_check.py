#!/usr/bin/env python3
"""`kiln serve`'s model control and drain over gRPC, through NVIDIA Triton's gRPC client.

usage: grpc_control_check.py KILN DEMO.onnx [--long]

One server, `--model-control-mode explicit --max-batch 8 --threads 1` over a repository folder
holding the demo model twice ("demo" and "spare") and "slow" (written here: 64 chained 256x256
MatMuls over x [N, 512, 256], a tenth of a second or more per request).

Part 1, repository control (tritonclient.grpc's load_model, unload_model,
get_model_repository_index, and the raw stub for what tritonclient does not send), while four
closed-loop clients use "demo" and two use "spare", every answer compared with ONNX Runtime's:
  - unload "spare" and load it again, 2 times (10 with --long): once unloaded it is not ready, the
    index says UNAVAILABLE (reason "unloaded"), the ready-only index leaves it out, and its
    requests get NOT_FOUND "unknown model"; once loaded it answers again;
  - reload "spare" while it is loaded and busy, 2 times (6): no request to it fails;
  - refusals: a model the repository lacks (load) and one not loaded (unload) get NOT_FOUND, a
    load with a config UNIMPLEMENTED, a repository_name UNIMPLEMENTED, an empty name
    INVALID_ARGUMENT;
  - no request to "demo" fails throughout.
Part 2, SIGTERM under 16 closed-loop gRPC clients of "demo" (8 open a channel per request, 8 keep
one channel) and one of "slow" (one channel), 0.8 s in (4 s with --long). The slow request in
flight at the signal keeps the drain going for a while, during which the demo clients spin on
UNAVAILABLE answers: the case where a gRPC server that simply stops would cancel the calls still
on their way. Each client goes on until a call fails to connect (refused: the server stopped
listening) or 10 s have passed. Checked:
  - kiln serve exits 0, within 1.5 s of the end of the drain it reports ("drained in N ms": once
    nothing admitted is left, not at the 30 s drain timeout);
  - every client ends refused, and no call got anything but OK or the server's UNAVAILABLE "the
    server is shutting down": no CANCELLED, no reset, on either kind of channel;
  - the server's own counts (kiln_requests_total at exit, less those of /metrics before part 2)
    equal the clients': every request kiln accepted was answered, and the answer arrived.
--long (CTest label slow) runs part 2 three times, each on a fresh server.
Exits 77 (skip; under CI a failure, check_venv.skip) when the package index cannot be reached.
"""
import collections
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
import check_venv  # noqa: E402

check_venv.reexec_in_venv()

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import ClientThreads, sigterm_under_load, start_server  # noqa: E402

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import urllib.request  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

FAILURES = []
SHUTTING_DOWN = "the server is shutting down"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def refused(message):
    """True when a call failed to connect (nothing listens): the client's own UNAVAILABLE."""
    m = (message or "").lower()
    return "connection refused" in m or "failed to connect to all addresses" in m


def write_slow(path):
    """y = x W^64 over x [N, 512, 256]: 4.3 GFLOP per sample."""
    w = numpy_helper.from_array(np.full((256, 256), 1.0 / 256, np.float32), "w")
    nodes, prev = [], "x"
    for i in range(64):
        out = "y" if i == 63 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, "w"], [out]))
        prev = out
    g = helper.make_graph(nodes, "slow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 512, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 512, 256])],
                          initializer=[w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


class Clients(ClientThreads):
    """Closed-loop clients of one model; each answer is compared with ONNX Runtime's."""

    def __init__(self, url, model, x, want, n):
        super().__init__()
        self.url, self.model, self.x, self.want = url, model, x, want
        self.start(n)

    def loop(self):
        client = grpcclient.InferenceServerClient(self.url)
        inp = grpcclient.InferInput("input", list(self.x.shape), "FP32")
        inp.set_data_from_numpy(self.x)
        while not self.stop.is_set():
            try:
                got = client.infer(self.model, [inp]).as_numpy("logits")
                good = got is not None and np.allclose(got, self.want, rtol=1e-3, atol=1e-4)
                with self.lock:
                    if good:
                        self.ok += 1
                    else:
                        self.errors.append("wrong values")
            except InferenceServerException as e:
                with self.lock:
                    self.errors.append(f"{e.status()} {e.message()}")
                time.sleep(0.01)
        client.close()


def error_of(call):
    """(status, message) of the InferenceServerException `call` raises, or (None, None)."""
    try:
        call()
    except InferenceServerException as e:
        return e.status(), e.message() or ""
    return None, None


def raw_error(call):
    """(code name, details) of the grpc.RpcError `call` raises, or (None, None)."""
    try:
        call()
    except grpc.RpcError as e:
        return e.code().name, e.details() or ""
    return None, None


def wait_ready(url):
    c = grpcclient.InferenceServerClient(url)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if c.is_server_ready():
                break
        except InferenceServerException:
            pass
        time.sleep(0.05)
    c.close()


def repository_part(url, x, want, cycles, reloads):
    control = grpcclient.InferenceServerClient(url)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(url))

    def index(ready=False):
        r = stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(ready=ready))
        return {m.name: (m.state, m.reason, m.version) for m in r.models}

    idx = index()
    check(idx == {m: ("READY", "", "1") for m in ("demo", "slow", "spare")},
          f"index: demo, slow and spare READY ({idx})")
    demo = Clients(url, "demo", x, want, 4)
    spare = Clients(url, "spare", x, want, 2)
    time.sleep(0.3)
    for i in range(cycles):
        spare.take()
        t0 = time.time()
        control.unload_model("spare")
        unload_s = time.time() - t0
        check(not control.is_model_ready("spare"), f"cycle {i}: spare not ready once unloaded "
              f"(unload {unload_s:.2f} s)")
        idx = index()
        check(idx.get("spare", ("",))[:2] == ("UNAVAILABLE", "unloaded"),
              f"cycle {i}: index says spare UNAVAILABLE, unloaded ({idx.get('spare')})")
        ready_idx = index(ready=True)
        check(sorted(ready_idx) == ["demo", "slow"],
              f"cycle {i}: ready-only index {sorted(ready_idx)}")
        time.sleep(0.2)
        _, errs = spare.take()
        # A request that found the model before it went is answered by it (the unload waits for
        # it); the ones after get NOT_FOUND.
        others = [e for e in errs if not e.startswith("StatusCode.NOT_FOUND unknown model 'spare'")]
        check(len(errs) > 0 and not others,
              f"cycle {i}: requests to the unloaded model get NOT_FOUND 'unknown model' "
              f"({len(errs) - len(others)} of {len(errs)}; others: {others[:2]})")
        t0 = time.time()
        control.load_model("spare")
        load_s = time.time() - t0
        check(control.is_model_ready("spare"), f"cycle {i}: spare ready after the load "
              f"({load_s:.2f} s)")
        time.sleep(0.2)
        ok, _ = spare.take()
        check(ok > 0, f"cycle {i}: spare answers again ({ok} answers)")

    spare.take()
    for i in range(reloads):
        control.load_model("spare")
        time.sleep(0.2)
    ok, errs = spare.take()
    check(ok > 0 and not errs,
          f"{reloads} reloads under load: {ok} answers from spare, {len(errs)} failed {errs[:2]}")

    refusals = [
        ("a load of a model the repository lacks", lambda: control.load_model("nope"),
         "StatusCode.NOT_FOUND", "failed to load model 'nope'"),
        ("an unload of a model not loaded", lambda: control.unload_model("nope"),
         "StatusCode.NOT_FOUND", "failed to unload model 'nope'"),
        ("a load with a config",
         lambda: control.load_model("demo", config='{"max_batch_size": 4}'),
         "StatusCode.UNIMPLEMENTED", "'config' parameter is not supported"),
    ]
    for what, call, status, text in refusals:
        st, msg = error_of(call)
        check(st == status and text in msg, f"{what}: {st} {msg}")
    for what, call, code, text in [
            ("a repository_name", lambda: stub.RepositoryModelLoad(
                service_pb2.RepositoryModelLoadRequest(repository_name="other",
                                                       model_name="demo")),
             "UNIMPLEMENTED", "repository_name 'other' is not supported"),
            ("an empty model name", lambda: stub.RepositoryModelUnload(
                service_pb2.RepositoryModelUnloadRequest()), "INVALID_ARGUMENT",
             "model_name is empty")]:
        c, msg = raw_error(call)
        check(c == code and text in msg, f"{what}: {c} {msg}")
    check(control.is_model_ready("demo") and control.is_model_ready("spare"),
          "both models ready after the refusals")

    demo.close()
    spare.close()
    ok, errs = demo.take()
    check(ok > 0 and not errs,
          f"the demo model under load throughout: {ok} answers, {len(errs)} failed {errs[:2]}")
    control.close()


def drain_client(url, model, per_request, stats, stop_at, signalled, x):
    """One closed-loop client: a channel per request, or one channel kept."""
    inp = grpcclient.InferInput("x" if model == "slow" else "input", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    client = None
    try:
        while time.time() < stop_at:
            if client is None:
                client = grpcclient.InferenceServerClient(url)
            try:
                client.infer(model, [inp])
                stats["ok_after" if signalled.is_set() else "ok"] += 1
            except InferenceServerException as e:
                message = e.message() or ""
                if e.status() == "StatusCode.UNAVAILABLE" and message == SHUTTING_DOWN:
                    stats["unavailable"] += 1
                elif refused(message):
                    stats["refused"] += 1
                    return
                else:  # CANCELLED, a reset, a closed socket, anything else
                    stats["reset"] += 1
                    stats["reset: " + f"{e.status()} {message}"[:100]] += 1
            if per_request:
                client.close()
                client = None
    finally:
        if client is not None:
            client.close()


def server_counts(text, prefix):
    """kiln_requests_total in Prometheus text (lines starting with `prefix`), by outcome."""
    served = collections.Counter()
    prefix += "kiln_requests_total{"
    for line in text.splitlines():
        if line.startswith(prefix):
            labels, value = line[len(prefix):].split("} ")
            served[labels.split('outcome="')[1].split('"')[0]] += int(float(value))
    return served


def drain_part(proc, log, url, http_port, x, load_s, run):
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics").read().decode()
    before = server_counts(metrics, "")
    signalled = threading.Event()
    stats = [collections.Counter() for _ in range(17)]
    stop_at = time.time() + load_s + 10
    slow_x = np.full((1, 512, 256), 0.5, np.float32)
    threads = [threading.Thread(target=drain_client,
                                args=(url, "demo", i % 2 == 0, stats[i], stop_at, signalled, x),
                                daemon=True)
               for i in range(16)]
    threads.append(threading.Thread(
        target=drain_client, args=(url, "slow", False, stats[16], stop_at, signalled, slow_x),
        daemon=True))
    rc, exit_s = sigterm_under_load(proc, threads, signalled, load_s)
    total = collections.Counter()
    for s in stats:
        total.update(s)
    log.seek(0)
    text = log.read()
    print("\n".join(line for line in text.splitlines() if "drain" in line))
    per_request = collections.Counter()
    kept = collections.Counter()
    for i, s in enumerate(stats[:16]):
        (per_request if i % 2 == 0 else kept).update(s)
    print(f"run {run}: exit {rc} {exit_s:.2f} s after SIGTERM; demo, channel per request "
          f"{dict(per_request)}; demo, one channel each {dict(kept)}; slow {dict(stats[16])}",
          flush=True)
    check(rc == 0, f"run {run}: kiln serve exits 0 (rc {rc})")
    drained = [line for line in text.splitlines() if "drained in" in line]
    drain_s = float(drained[0].split("drained in ")[1].split(" ms")[0]) / 1000 if drained else 99
    check(exit_s < drain_s + 1.5, f"run {run}: it exits once nothing admitted is left: "
          f"{exit_s:.2f} s after SIGTERM, the drain took {drain_s:.2f} s")
    check(all(s["refused"] == 1 for s in stats),
          f"run {run}: every client ends refused: {[s['refused'] for s in stats]}")
    check(total["reset"] == 0,
          f"run {run}: no call got anything but OK or the server's UNAVAILABLE: "
          f"{total['reset']} ({[k for k in total if k.startswith('reset: ')][:3]})")
    check(total["ok"] > 0, f"run {run}: answers before the signal ({total['ok']})")
    served = server_counts(text, "kiln serve: ")
    served.subtract(before)
    served = +served
    answered = total["ok"] + total["ok_after"]
    check(served["success"] == answered and served["shutting_down"] == total["unavailable"]
          and set(served) <= {"success", "shutting_down"},
          f"run {run}: the server's counts {dict(served)} equal the clients' ({answered} OK, "
          f"{total['unavailable']} UNAVAILABLE)")


def main():
    kiln, demo = sys.argv[1], sys.argv[2]
    long_run = "--long" in sys.argv[3:]
    tmp = tempfile.mkdtemp()
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    shutil.copy(demo, os.path.join(repo, "demo.onnx"))
    shutil.copy(demo, os.path.join(repo, "spare.onnx"))
    write_slow(os.path.join(repo, "slow.onnx"))
    sess = ort.InferenceSession(demo, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).random((1, 1, 28, 28), dtype=np.float32)
    want = sess.run(None, {"input": x})[0]
    extra = ["--threads", "1"]
    proc, log, http_port, grpc_port = start_server(
        kiln, repo, extra + ["--model-control-mode", "explicit"], max_batch=8)
    url = f"127.0.0.1:{grpc_port}"
    try:
        wait_ready(url)
        t0 = time.time()
        repository_part(url, x, want, 10 if long_run else 2, 6 if long_run else 2)
        print(f"repository part: {time.time() - t0:.1f} s", flush=True)
        drain_part(proc, log, url, http_port, x, 4.0 if long_run else 0.8, 0)
        for run in range(1, 3 if long_run else 1):
            proc, log, http_port, grpc_port = start_server(kiln, repo, extra, max_batch=8)
            url = f"127.0.0.1:{grpc_port}"
            wait_ready(url)
            drain_part(proc, log, url, http_port, x, 4.0, run)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            log.seek(0)
            print(log.read()[-4000:])
    print(f"{len(FAILURES)} failed")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
