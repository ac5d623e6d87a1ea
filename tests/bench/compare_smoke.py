#!/usr/bin/python3
"""End-to-end check of bench/compare: one round of ResNet-18 at batch 1 with tiny iteration counts
through kiln, ONNX Runtime, OpenVINO f32 and OpenVINO default. It makes bench/.venv on first use
(downloads the pinned wheels) and exports the model, hence CTest label "slow".

usage: tests/bench/compare_smoke.py KILN WORKDIR
Checks: exit status 0, an ok run of each of the four runtimes, every ratio finite and positive,
the anchors' JSON keys as kiln bench's, OpenVINO's f32 run reporting f32.
"""
import json
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNTIMES = ["kiln", "ort", "ov-f32", "ov-default"]


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    kiln, workdir = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(workdir, exist_ok=True)
    out = os.path.join(workdir, "compare_smoke.json")
    if os.path.exists(out):
        os.remove(out)
    cmd = [os.path.join(REPO, "bench", "compare"), "--kiln", kiln, "--models", "resnet18",
           "--batches", "1", "--rounds", "1", "--b1-warmup", "1", "--b1-iterations", "3",
           "--workdir", workdir, "--out", out, "--timeout", "600"]
    print(" ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True)
    if r.returncode != 0:
        fail(f"bench/compare exited {r.returncode}")
    with open(out) as f:
        doc = json.load(f)
    runs = doc["runs"]
    for rt in RUNTIMES:
        ok = [x for x in runs if x["runtime"] == rt and x["ok"]]
        if len(ok) != 1:
            fail(f"expected one ok {rt} run, got {len(ok)}: {[x.get('error') for x in runs]}")
        res = ok[0]["result"]
        for key in ("load_ms", "first_run_ms", "throughput_per_s", "batch", "threads"):
            if key not in res:
                fail(f"{rt}'s result has no '{key}'")
        lat = res["latency_ms"]
        if not all(k in lat and lat[k] > 0 for k in ("min", "p50", "p99", "mean", "max")):
            fail(f"{rt}'s latency_ms is incomplete or not positive: {lat}")
        if rt != "kiln":
            if not res.get("rss_mb", 0) > 0 or not res.get("version"):
                fail(f"{rt}: no rss_mb or version in {sorted(res)}")
    ov_f32 = next(x for x in runs if x["runtime"] == "ov-f32")["result"]
    if ov_f32.get("precision") != "f32":
        fail(f"ov-f32 ran at precision {ov_f32.get('precision')}")
    (s,) = doc["summary"]
    names = ["kiln/ort", "kiln/ov-f32", "kiln/ov-default"]
    for name in names:
        c = s["comparisons"].get(name)
        if not c or len(c["ratios"]) != 1:
            fail(f"no ratio {name}: {s['comparisons']}")
        x = c["ratio_median"]
        if not (isinstance(x, float) and math.isfinite(x) and x > 0):
            fail(f"ratio {name} is {x}")
    print("ok: " + ", ".join(f"{n} {s['comparisons'][n]['ratio_median']:.3f}" for n in names) +
          f" (OpenVINO default ran {s['ov_default_precision']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
