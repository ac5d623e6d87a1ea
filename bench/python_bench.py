#!/usr/bin/env python3
"""The Python package's targets, measured (issue 40). Run in the check venv with the built package:

    PYTHONPATH=build/release/python ~/.cache/kiln/check-venv/bin/python bench/python_bench.py \
        [--only overhead,resnet50,threads,import,ort] [--rounds 3] [--out FILE.json]

Each part alternates what it compares over --rounds rounds and reports the median of the
per-round ratios with their range (the machine drifts; docs/benchmarking.md):
  overhead  a one-node model (Relu on float32[1,16]): Session.run's p50 per call from Python
            against C++ RunInto's p50 timed in a C++ loop on the same session (_time_run_into),
            20,000 calls each; target: at most 15 us more. Also run_into and ORT's Python run.
  resnet50  ResNet-50 (torchvision, seeded weights, opset 17) at batch 32, 2 threads:
            Session.bench's items/s against `kiln bench`'s on the same file; target: within 2 %.
  threads   ResNet-18 at batch 1, one compute thread per run: runs/s of two Python threads
            sharing one Session against one thread, 8 s each; target: >= 1.8x on 2 cores.
  import    `import kiln` in a fresh interpreter, 10 times: median wall time; target < 150 ms.
  ort       kiln.ort.InferenceSession against onnxruntime.InferenceSession (1.32.0), the five
            torchvision models at batch 1, intra_op_num_threads=2: p50 latency ratio kiln/ORT
            (< 1: kiln faster) over 30 runs per round; target: <= 1 on each. --models picks.
The CPU (kiln.doctor()) is in the JSON and the first line of the table.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import kiln

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]


def zoo(workdir):
    """The torchvision models (tests/models/make_torchvision_refs.py; cheap when present)."""
    if not all(os.path.exists(os.path.join(workdir, f"{m}_op17.onnx")) for m in MODELS):
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "models",
                                                         "make_torchvision_refs.py"), workdir,
                        "--models", ",".join(MODELS), "--opsets", "17", "--batches", "1",
                        "--calibrate-bn"], check=True)
    return {m: os.path.join(workdir, f"{m}_op17.onnx") for m in MODELS}


def p50(xs):
    return statistics.median(xs)


def p50_us(call, n):
    """The median of n calls' wall times, in microseconds."""
    t = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()
        t.append((time.perf_counter_ns() - t0) / 1e3)
    return p50(t)


def summary(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "rounds": ratios}


def relu_model():
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_node",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def part_overhead(a, res):
    import onnxruntime as ort
    model = relu_model()
    s = kiln.Session(model, threads=1)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    feeds = {"x": x}
    out = {"y": np.empty((1, 16), np.float32)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    o = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    n = 20000
    rows = []
    for _ in range(a.rounds):
        native = p50(s._time_run_into(feeds, n))
        py_run = p50_us(lambda: s.run(feeds), n)
        py_into = p50_us(lambda: s.run_into(feeds, out), n)
        ort_run = p50_us(lambda: o.run(None, feeds), n)
        rows.append({"native_run_into_us": native, "python_run_us": py_run,
                     "python_run_into_us": py_into, "ort_python_run_us": ort_run})
    res["overhead"] = {
        "rounds": rows,
        "run_minus_native_us": summary([r["python_run_us"] - r["native_run_into_us"] for r in rows]),
        "run_into_minus_native_us": summary([r["python_run_into_us"] - r["native_run_into_us"]
                                             for r in rows]),
        "target_us": 15}


def part_resnet50(a, res, models):
    path = models["resnet50"]
    kiln_cli = os.path.join(REPO, "build", "release", "tools", "kiln", "kiln")
    x = np.random.default_rng(0).standard_normal((32, 3, 224, 224), dtype=np.float32)
    s = kiln.Session(path, threads=2)
    ratios, rows = [], []
    for r in range(a.rounds):
        order = ["cli", "python"] if r % 2 == 0 else ["python", "cli"]
        got = {}
        for who in order:
            if who == "cli":
                with tempfile.NamedTemporaryFile(suffix=".json") as f:
                    subprocess.run([kiln_cli, "bench", path, "--batch", "32", "--threads", "2",
                                    "--warmup", "2", "--iterations", "10", "--json", f.name],
                                   check=True, capture_output=True)
                    got["cli"] = json.load(open(f.name))["throughput_per_s"]
            else:
                got["python"] = s.bench({"input": x}, warmup=2, iterations=10)["items_per_s"]
        # both: the batch over the mean of the timed runs
        rows.append(got)
        ratios.append(got["python"] / got["cli"])
    res["resnet50_b32"] = {"rounds": rows, "python_over_cli": summary(ratios), "target": 0.98}


def part_threads(a, res, models):
    s = kiln.Session(models["resnet18"], threads=1)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224), dtype=np.float32)
    feeds = {"input": x}
    for _ in range(3):
        s.run(feeds)
    seconds = 8.0

    def rate(n_threads):
        counts = [0] * n_threads
        stop = time.perf_counter() + seconds

        def work(i):
            while time.perf_counter() < stop:
                s.run(feeds)
                counts[i] += 1
        ts = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return sum(counts) / (time.perf_counter() - t0)
    rows, ratios = [], []
    for r in range(a.rounds):
        got = {}
        for n in ([1, 2] if r % 2 == 0 else [2, 1]):
            got[n] = rate(n)
        rows.append({"one_thread_runs_per_s": got[1], "two_threads_runs_per_s": got[2]})
        ratios.append(got[2] / got[1])
    res["threads"] = {"rounds": rows, "two_over_one": summary(ratios), "target": 1.8}


def part_import(a, res):
    code = "import time; t = time.perf_counter(); import kiln; print(time.perf_counter() - t)"
    env = dict(os.environ)
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  env=env, check=True).stdout) * 1e3 for _ in range(10)]
    res["import"] = {"ms": times, "median_ms": statistics.median(times), "target_ms": 150}


def part_ort(a, res, models):
    import onnxruntime as ort
    import kiln.ort as kort
    table = {}
    for m, path in models.items():
        x = np.random.default_rng(2).standard_normal((1, 3, 224, 224), dtype=np.float32)
        sessions = {}
        for name, mod in (("kiln", kort), ("ort", ort)):
            so = mod.SessionOptions()
            so.intra_op_num_threads = 2
            so.inter_op_num_threads = 1
            sessions[name] = mod.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        outs = {k: v.run(None, {"input": x})[0] for k, v in sessions.items()}
        same = bool(np.allclose(outs["kiln"], outs["ort"], rtol=1e-3, atol=1e-4))
        ratios, rows = [], []
        for r in range(a.rounds):
            got = {}
            for name in (["kiln", "ort"] if r % 2 == 0 else ["ort", "kiln"]):
                sess = sessions[name]
                for _ in range(5):
                    sess.run(None, {"input": x})
                t = []
                for _ in range(30):
                    t0 = time.perf_counter()
                    sess.run(None, {"input": x})
                    t.append((time.perf_counter() - t0) * 1e3)
                got[name] = p50(t)
            rows.append(got)
            ratios.append(got["kiln"] / got["ort"])
        table[m] = {"rounds": rows, "kiln_over_ort_p50": summary(ratios), "outputs_match": same}
        print(f"  {m}: kiln/ORT {statistics.median(ratios):.3f}", flush=True)
    res["ort_b1"] = {"models": table, "ort_version": ort.__version__, "target": 1.0}


def render(res):
    cpu = res["cpu"]
    lines = [f"CPU: {cpu['model']}, {cpu['physical_cores']} cores, oneDNN ISA "
             f"{cpu.get('onednn_isa', '?')}; {res['date']}; median of {res['rounds']} rounds "
             "(range)", "", "| target | measured | met |", "|---|---|---|"]

    def rng(s, fmt):
        return f"{fmt.format(s['median'])} ({fmt.format(s['min'])} to {fmt.format(s['max'])})"
    if "overhead" in res:
        o = res["overhead"]
        r0 = o["rounds"][0]
        lines.append(f"| Session.run <= 15 us over C++ RunInto (one-node model) | "
                     f"+{rng(o['run_minus_native_us'], '{:.1f}')} us (C++ {r0['native_run_into_us']:.1f} us, "
                     f"run_into +{o['run_into_minus_native_us']['median']:.1f} us, ORT's Python run "
                     f"{r0['ort_python_run_us']:.1f} us) | "
                     f"{'yes' if o['run_minus_native_us']['median'] <= 15 else 'no'} |")
    if "resnet50_b32" in res:
        o = res["resnet50_b32"]
        lines.append(f"| ResNet-50 b32 items/s from Python within 2 % of kiln bench | "
                     f"{rng(o['python_over_cli'], '{:.3f}')}x | "
                     f"{'yes' if o['python_over_cli']['median'] >= 0.98 else 'no'} |")
    if "threads" in res:
        o = res["threads"]
        lines.append(f"| two Python threads on one session >= 1.8x one (ResNet-18 b1, 1 thread "
                     f"per run) | {rng(o['two_over_one'], '{:.2f}')}x | "
                     f"{'yes' if o['two_over_one']['median'] >= 1.8 else 'no'} |")
    if "import" in res:
        o = res["import"]
        lines.append(f"| import kiln < 150 ms | {o['median_ms']:.0f} ms | "
                     f"{'yes' if o['median_ms'] < 150 else 'no'} |")
    if "ort_b1" in res:
        for m, o in res["ort_b1"]["models"].items():
            lines.append(f"| kiln.ort {m} b1 p50 <= ORT {res['ort_b1']['ort_version']} | "
                         f"{rng(o['kiln_over_ort_p50'], '{:.3f}')}x, outputs "
                         f"{'match' if o['outputs_match'] else 'DIFFER'} | "
                         f"{'yes' if o['kiln_over_ort_p50']['median'] <= 1.0 else 'no'} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="overhead,resnet50,threads,import,ort")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--models", default=",".join(MODELS), help="for the ort part")
    p.add_argument("--workdir", default=os.path.join(REPO, "build", "release",
                                                     "torchvision_models_calibrated"))
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results",
                                                 f"python_{time.strftime('%Y-%m-%d')}.json"))
    a = p.parse_args()
    parts = a.only.split(",")
    doctor = kiln.doctor()
    res = {"date": time.strftime("%Y-%m-%d"), "rounds": a.rounds, "cpu": doctor["cpu"],
           "kiln": kiln.__version__, "numpy": np.__version__}
    models = zoo(a.workdir) if {"resnet50", "threads", "ort"} & set(parts) else {}
    for part in parts:
        print(f"== {part}", flush=True)
        if part == "overhead":
            part_overhead(a, res)
        elif part == "resnet50":
            part_resnet50(a, res, models)
        elif part == "threads":
            part_threads(a, res, models)
        elif part == "import":
            part_import(a, res)
        elif part == "ort":
            part_ort(a, res, {m: models[m] for m in a.models.split(",")})
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    json.dump(res, open(a.out, "w"), indent=1)
    print(render(res))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
