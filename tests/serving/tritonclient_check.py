#!/usr/bin/env python3
"""`kiln serve` against NVIDIA Triton's own Python client (tritonclient, HTTP and gRPC).

usage: tritonclient_check.py KILN MODEL.onnx

Starts `kiln serve MODEL --http-port 0 --grpc-port 0`, waits for readiness, then through
tritonclient (pinned in tests/pyenv/check_venv.py): server and model metadata, the model config,
inference with JSON tensors, with binary tensors and over gRPC, each compared with ONNX Runtime on
the same inputs (atol 1e-4, rtol 1e-4); errors (wrong shape, wrong dtype, unknown model) with
their status codes and a message naming the input; statistics; the Prometheus text; 32
concurrent clients merged into batches; and SIGTERM under load: every request either succeeds or
is refused as unavailable (none accepted and then failed), and the server exits 0 within the
drain timeout. Exits 77 (skip; under CI a failure, check_venv.skip) when the package index cannot be reached.
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
import check_venv  # noqa: E402
from serve_util import start_server  # noqa: E402

check_venv.reexec_in_venv()

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def main():
    kiln, model = sys.argv[1], sys.argv[2]
    name = os.path.splitext(os.path.basename(model))[0]
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    in_name, out_name = ref.get_inputs()[0].name, ref.get_outputs()[0].name
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 1, 28, 28)).astype(np.float32)
    want = ref.run(None, {in_name: x})[0]

    proc, log, http_port, grpc_port = start_server(kiln, model)
    h = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}", concurrency=4)
    g = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    deadline = time.time() + 60
    while not h.is_server_ready() and time.time() < deadline:
        time.sleep(0.05)
    try:
        check(h.is_server_live() and h.is_server_ready(), "HTTP live and ready")
        check(g.is_server_live() and g.is_server_ready(), "gRPC live and ready")
        check(h.is_model_ready(name) and g.is_model_ready(name), "model ready (HTTP, gRPC)")
        meta = h.get_model_metadata(name)
        check(meta["inputs"][0]["name"] == in_name and meta["inputs"][0]["datatype"] == "FP32"
              and meta["inputs"][0]["shape"] == [-1, 1, 28, 28], "HTTP model metadata")
        gmeta = g.get_model_metadata(name, as_json=True)
        check(gmeta["outputs"][0]["name"] == out_name, "gRPC model metadata")
        check(h.get_server_metadata()["name"] == "kiln", "HTTP server metadata")
        cfg = h.get_model_config(name)
        check(cfg["max_batch_size"] == 16 and cfg["input"][0]["dims"] == [1, 28, 28],
              "HTTP model config (batch dim dropped)")
        gcfg = g.get_model_config(name, as_json=True)["config"]
        check(gcfg["max_batch_size"] == 16 and gcfg["input"][0]["data_type"] == "TYPE_FP32",
              "gRPC model config")

        for binary in (False, True):
            inp = httpclient.InferInput(in_name, list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=binary)
            out = httpclient.InferRequestedOutput(out_name, binary_data=binary)
            got = h.infer(name, [inp], outputs=[out], request_id="r1").as_numpy(out_name)
            check(got is not None and np.allclose(got, want, atol=1e-4, rtol=1e-4),
                  f"HTTP infer ({'binary' if binary else 'JSON'}) matches ONNX Runtime")
        inp = httpclient.InferInput(in_name, list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        got = h.infer(name, [inp]).as_numpy(out_name)  # no outputs named: all, binary
        check(np.allclose(got, want, atol=1e-4, rtol=1e-4), "HTTP infer, outputs unnamed")
        ginp = grpcclient.InferInput(in_name, list(x.shape), "FP32")
        ginp.set_data_from_numpy(x)
        got = g.infer(name, [ginp]).as_numpy(out_name)
        check(np.allclose(got, want, atol=1e-4, rtol=1e-4), "gRPC infer matches ONNX Runtime")

        def http_error(inputs, model_name=name):
            try:
                h.infer(model_name, inputs)
            except InferenceServerException as e:
                return e.status(), e.message()
            return None, None

        bad = httpclient.InferInput(in_name, [1, 1, 20, 20], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 1, 20, 20), np.float32))
        status, msg = http_error([bad])
        check(status == "400" and f"input '{in_name}'" in msg, f"HTTP wrong shape: {status} {msg}")
        bad = httpclient.InferInput(in_name, [1, 1, 28, 28], "INT32")
        bad.set_data_from_numpy(np.zeros((1, 1, 28, 28), np.int32))
        status, msg = http_error([bad])
        check(status == "400" and f"input '{in_name}'" in msg, f"HTTP wrong dtype: {status} {msg}")
        status, msg = http_error([inp], "no_such_model")
        check(status == "404", f"HTTP unknown model: {status} {msg}")
        try:
            gbad = grpcclient.InferInput(in_name, [1, 1, 20, 20], "FP32")
            gbad.set_data_from_numpy(np.zeros((1, 1, 20, 20), np.float32))
            g.infer(name, [gbad])
            check(False, "gRPC wrong shape refused")
        except InferenceServerException as e:
            check(e.status() == "StatusCode.INVALID_ARGUMENT" and in_name in e.message(),
                  f"gRPC wrong shape: {e.status()} {e.message()}")
        try:
            g.infer("no_such_model", [ginp])
            check(False, "gRPC unknown model refused")
        except InferenceServerException as e:
            check(e.status() == "StatusCode.NOT_FOUND", f"gRPC unknown model: {e.status()}")
        check(h.is_server_live(), "still live after the errors")

        # 32 concurrent clients, batch 1 each: answered, and merged into fewer batches.
        one = x[:1]
        errors = []

        def client(k):
            c = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
            for _ in range(10):
                i = httpclient.InferInput(in_name, [1, 1, 28, 28], "FP32")
                i.set_data_from_numpy(one)
                try:
                    y = c.infer(name, [i]).as_numpy(out_name)
                    if not np.allclose(y, want[:1], atol=1e-4, rtol=1e-4):
                        errors.append("wrong values")
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))

        before = h.get_inference_statistics(name)["model_stats"][0]
        threads = [threading.Thread(target=client, args=(k,)) for k in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = h.get_inference_statistics(name)["model_stats"][0]
        n = after["inference_count"] - before["inference_count"]
        batches = after["execution_count"] - before["execution_count"]
        check(not errors and n == 320, f"32 clients x 10 requests answered ({len(errors)} errors)")
        check(batches < n, f"requests merged: {n} samples in {batches} batches")
        gstats = g.get_inference_statistics(name, as_json=True)["model_stats"][0]
        check(int(gstats["inference_stats"]["success"]["count"]) ==
              after["inference_stats"]["success"]["count"], "gRPC statistics = HTTP statistics")
        import urllib.request
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics").read().decode()
        for m in ("kiln_requests_total", "kiln_request_duration_seconds_bucket",
                  "kiln_queue_duration_seconds", "kiln_compute_duration_seconds",
                  "kiln_batch_size_bucket", "kiln_queue_depth", "kiln_ready 1"):
            check(m in metrics, f"/metrics has {m}")
        check('protocol="grpc"' in metrics and 'outcome="invalid_argument"' in metrics,
              "/metrics counts gRPC and failures by outcome")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    check(proc.returncode == 0, f"first server exited 0 ({proc.returncode})")

    # SIGTERM under load (HTTP and gRPC clients): nothing accepted fails; exit within the drain.
    proc, log, http_port, grpc_port = start_server(kiln, model, ["--drain-timeout", "10"])
    hc = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
    while not hc.is_server_ready():
        time.sleep(0.05)
    stop = threading.Event()
    sigterm = threading.Event()
    results = {"ok": 0, "refused": 0, "closed": 0, "failed": []}
    lock = threading.Lock()

    def loader(use_grpc):
        try:
            c = (grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}") if use_grpc
                 else httpclient.InferenceServerClient(f"127.0.0.1:{http_port}"))
        except Exception as e:  # noqa: BLE001
            with lock:
                results["failed"].append(str(e))
            return
        mod = grpcclient if use_grpc else httpclient
        while not stop.is_set():
            i = mod.InferInput(in_name, [1, 1, 28, 28], "FP32")
            i.set_data_from_numpy(one)
            try:
                c.infer(name, [i])
                kind = "ok"
            except InferenceServerException as e:
                text = f"{e.status()} {e.message()}"
                if "shutting down" in text:
                    kind = "refused"
                elif sigterm.is_set() and ("UNAVAILABLE" in text or "CANCELLED" in text):
                    # Closing: gRPC cancels calls it received but never handed to kiln. Whether
                    # kiln admitted any of them is checked below against the server's counters.
                    kind = "closed"
                else:
                    kind = text
            except (ConnectionError, OSError) as e:
                kind = "closed" if sigterm.is_set() else str(e)
            with lock:
                if kind in ("ok", "refused", "closed"):
                    results[kind] += 1
                else:
                    results["failed"].append(kind)
                if kind == "closed":
                    return

    threads = [threading.Thread(target=loader, args=(k % 2 == 1,)) for k in range(16)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    t0 = time.time()
    sigterm.set()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    exit_s = time.time() - t0
    stop.set()
    for t in threads:
        t.join()
    log.seek(0)
    out = log.read()
    print(out.strip().splitlines()[-1] if out.strip() else "(no log)")
    check(results["ok"] > 0, f"load ran: {results['ok']} answered before and during the drain")
    check(not results["failed"],
          f"no accepted request failed ({len(results['failed'])}: {results['failed'][:3]})")
    check(proc.returncode == 0 and exit_s < 10,
          f"exit 0 within the drain timeout (code {proc.returncode}, {exit_s:.2f} s)")
    check("0 unfinished" in out, "the drain left nothing unanswered")
    # The server's own count of successes equals the clients': nothing it admitted was lost, and
    # it failed nothing.
    served = {}
    for line in out.splitlines():
        if line.startswith("kiln serve: kiln_requests_total{"):
            labels, value = line[len("kiln serve: kiln_requests_total{"):].split("} ")
            outcome = labels.split('outcome="')[1].split('"')[0]
            served[outcome] = served.get(outcome, 0) + int(float(value))
    check(served.get("success", 0) == results["ok"],
          f"server successes {served.get('success', 0)} = client successes {results['ok']} "
          f"(refused {results['refused']}, cut at close {results['closed']}); server: {served}")
    check(set(served) <= {"success", "shutting_down"}, f"no other outcome at the server: {served}")

    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
