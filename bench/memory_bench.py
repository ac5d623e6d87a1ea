#!/usr/bin/env python3
"""Resident memory of N sessions of one model in one process: kiln with shared weights (the
default), kiln with share_weights=False, and ONNX Runtime (one InferenceSession each, default
options), plus kiln's open-run-close cycles.

Each figure comes from a fresh child process (so peaks do not mix): it imports the runtime and
numpy, reads VmRSS, opens N sessions and runs each once on batch 1 with 1 thread, and reads VmRSS
and VmHWM (the process's peak resident set) again. "growth" is VmHWM minus the resident set after
the imports: what the sessions cost.

usage: bench/memory_bench.py MODEL.onnx [--sessions 1,8] [--cycles 200] [--out results.json]
       bench/memory_bench.py --render results.json      (the Markdown table docs/ uses)
Run it with a Python that imports kiln (PYTHONPATH=build/release/python) and, for the ONNX
Runtime rows, onnxruntime (the check venv: tests/pyenv/check_venv.py).
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

CHILD = r"""
import json, sys
import numpy as np
def status():
    d = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            d[k] = int(v.split()[0]) / 1024.0
    return d
path, n, mode, cycles = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
if mode == "ort":
    import onnxruntime as ort
else:
    import kiln
base = status()["VmRSS"]
def open_one():
    if mode == "ort":
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        run = lambda x: s.run(None, {name: x})
    else:
        s = kiln.Session(path, threads=1, share_weights=(mode == "kiln"))
        name = s.inputs[0].name
        run = lambda x: s.run({name: x})
    return s, run
sessions, extra = [], {}
x = None
if cycles:
    s, run = open_one()
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    run(x)
    del s, run
    start = status()["VmRSS"]
    for _ in range(cycles):
        s, run = open_one()
        run(x)
        del s, run
    extra = {"cycle_start_mib": start, "cycle_end_mib": status()["VmRSS"]}
else:
    for i in range(n):
        s, run = open_one()
        if x is None:
            x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
        run(x)
        sessions.append(s)
    if mode != "ort":
        st = sessions[0].stats()
        extra = {"constant_bytes": st["constant_bytes"], "packed_weight_bytes": st["packed_weight_bytes"],
                 "arena_bytes": st["arena_bytes"],
                 "shared": [t.stats()["weights_shared"] for t in sessions]}
end = status()
print(json.dumps({"base_mib": base, "rss_mib": end["VmRSS"], "peak_mib": end["VmHWM"],
                  "growth_mib": end["VmHWM"] - base, **extra}))
"""


def measure(model, n, mode, cycles=0):
    r = subprocess.run([sys.executable, "-c", CHILD, model, str(n), mode, str(cycles)],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        raise RuntimeError(f"{mode} x{n}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def run(args):
    modes = ["kiln", "unshared"]
    try:
        import onnxruntime  # noqa: F401
        modes.append("ort")
    except ImportError:
        print("memory_bench: no onnxruntime here; its rows are left out", file=sys.stderr)
    counts = [int(c) for c in args.sessions.split(",")]
    rows = []
    for mode in modes:
        for n in counts:
            m = measure(args.model, n, mode)
            rows.append({"runtime": mode, "sessions": n, **m})
            print(f"{mode:14s} x{n}: peak {m['peak_mib']:.0f} MiB, growth {m['growth_mib']:.0f} MiB",
                  file=sys.stderr)
    cycles = None
    if args.cycles:
        cycles = measure(args.model, 0, "kiln", args.cycles)
        cycles["cycles"] = args.cycles
        print(f"kiln {args.cycles} open-run-close cycles: {cycles['cycle_start_mib']:.0f} -> "
              f"{cycles['cycle_end_mib']:.0f} MiB", file=sys.stderr)
    out = {"model": os.path.basename(args.model), "cpu": cpu_name(),
           "date": time.strftime("%Y-%m-%d"), "threads": 1, "batch": 1, "rows": rows,
           "cycles": cycles}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return out


def render(res):
    by = {(r["runtime"], r["sessions"]): r for r in res["rows"]}
    counts = sorted({r["sessions"] for r in res["rows"]})
    names = {"kiln": "kiln (shared weights, default)", "unshared": "kiln, share_weights=False",
             "ort": "ONNX Runtime (default options)"}
    head = "| runtime | " + " | ".join(f"{n} session{'s' if n > 1 else ''}: peak / growth MiB"
                                       for n in counts)
    lo, hi = counts[0], counts[-1]
    lines = [head + f" | {hi} over {lo} (peak) |", "|---" * (len(counts) + 2) + "|"]
    for rt in ("kiln", "unshared", "ort"):
        if (rt, lo) not in by:
            continue
        cells = [f"{by[(rt, n)]['peak_mib']:.0f} / {by[(rt, n)]['growth_mib']:.0f}" for n in counts]
        ratio = by[(rt, hi)]["peak_mib"] / by[(rt, lo)]["peak_mib"]
        lines.append(f"| {names[rt]} | " + " | ".join(cells) + f" | {ratio:.2f}x |")
    text = "\n".join(lines)
    text += (f"\n\n{res['model']}, batch {res['batch']}, {res['threads']} thread per session, "
             f"{res['cpu']}, {res['date']}.")
    c = res.get("cycles")
    if c:
        text += (f" {c['cycles']} kiln open-run-close cycles: resident {c['cycle_start_mib']:.0f} MiB "
                 f"after the first, {c['cycle_end_mib']:.0f} MiB after the last.")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?")
    ap.add_argument("--sessions", default="1,8")
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--out")
    ap.add_argument("--render")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            print(render(json.load(f)))
        return
    if not args.model:
        ap.error("give a model, or --render results.json")
    print(render(run(args)))


if __name__ == "__main__":
    main()
