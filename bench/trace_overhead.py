#!/usr/bin/env python3
"""What `--trace` (per-step timing) costs a run: kiln.Session runs timed plainly and with every
step timed (Session.trace), the same Run calls timed the same way in C++, alternating in rounds in
one process; median of the per-round ratios of median run times. Off, the runs take the untimed
path (no clock reads per step).

usage: PYTHONPATH=build/release/python bench/trace_overhead.py MODEL.onnx... [--rounds 8]
       [--runs 15] [--out results.json]
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import kiln


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for path in a.models:
        s = kiln.Session(path)
        feeds = {i.name: np.random.default_rng(0).random(
            [d if isinstance(d, int) and d > 0 else 1 for d in i.shape], dtype=np.float32)
            for i in s.inputs}
        for _ in range(10):
            s.run(feeds)
        ratios, plain_ms = [], []
        for r in range(a.rounds):
            def plain_runs():  # the same Run calls as _trace's, untraced
                return s._time_runs(feeds, a.runs)  # ms

            def traced_runs():
                return s._trace(feeds, "/tmp/kiln_trace_overhead.json", a.runs)  # ms

            if r % 2 == 0:  # alternate which goes first
                plain, traced = plain_runs(), traced_runs()
            else:
                traced, plain = traced_runs(), plain_runs()
            ratios.append(statistics.median(traced) / statistics.median(plain))
            plain_ms.append(statistics.median(plain))
        rows.append({"model": os.path.basename(path), "plain_ms": statistics.median(plain_ms),
                     "ratio": statistics.median(ratios), "range": [min(ratios), max(ratios)]})
        print(f"{rows[-1]['model']}: run {rows[-1]['plain_ms']:.2f} ms; traced/plain "
              f"{rows[-1]['ratio']:.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "")
    if a.out:
        json.dump({"date": time.strftime("%Y-%m-%d"), "cpu": cpu, "rounds": a.rounds,
                   "runs": a.runs, "baseline": "Run, untraced", "rows": rows}, open(a.out, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
