#!/usr/bin/env python3
"""What sizing threads from the CPUs a process may use is worth: kiln bench inside a CPU limit,
with the thread count kiln used before (the machine's physical cores, forced with --threads) and
with its default now (the affinity mask and cgroup quota, rounded down).

usage: bench/threads_bench.py KILN MODEL.onnx [--limit affinity|cgroup] [--cpus 0] [--quota 1.0]
                              [--before-threads N] [--rounds 3] [--iterations 30]
                              [--out results.json]
       bench/threads_bench.py --render results.json

--limit affinity: `taskset -c CPUS`. --limit cgroup: a v1 or v2 cgroup with a CPU quota of
--quota CPUs (made and removed here; needs root), the affinity mask left whole unless --pin. Each round runs
both settings one after the other (order alternating), batch 1, and the figure is the median
of the per-round ratios (before / after) of p50 and p99 latency.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def physical_cores(kiln):
    r = subprocess.run([kiln, "doctor", "--json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["cpu"]["physical_cores"]


def make_cgroup(quota):
    name = f"kiln-threads-bench-{os.getpid()}"
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        path = f"/sys/fs/cgroup/{name}"
        os.mkdir(path)
        open(f"{path}/cpu.max", "w").write(f"{int(quota * 100000)} 100000")
    else:
        path = f"/sys/fs/cgroup/cpu/{name}"
        os.mkdir(path)
        open(f"{path}/cpu.cfs_period_us", "w").write("100000")
        open(f"{path}/cpu.cfs_quota_us", "w").write(str(int(quota * 100000)))
    return path


def bench(kiln, model, prefix, threads, iterations):
    cmd = prefix + [kiln, "bench", model, "--batch", "1", "--warmup", "5", "--iterations",
                    str(iterations), "--json", "-"]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {r.stderr[-1000:]}")
    j = json.loads(r.stdout)
    return {"threads": j["threads"], "p50": j["latency_ms"]["p50"], "p99": j["latency_ms"]["p99"]}


def run(a):
    # Before: the machine's physical cores, or --before-threads to stand for a bigger host's.
    before_threads = a.before_threads or physical_cores(a.kiln)
    cg = None
    if a.limit == "affinity":
        prefix = ["taskset", "-c", a.cpus]
    else:
        cg = make_cgroup(a.quota)
        procs = os.path.join(cg, "cgroup.procs")
        pin = f"taskset -c {a.cpus} " if a.pin else ""
        prefix = ["bash", "-c", f"echo $$ > {procs} && exec {pin}\"$@\"", "in_cgroup"]
    rounds = []
    try:
        for r in range(a.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            got = {}
            for which in order:
                got[which] = bench(a.kiln, a.model, prefix,
                                   before_threads if which == "before" else 0, a.iterations)
            rounds.append(got)
            print(f"round {r}: before {got['before']}, after {got['after']}", file=sys.stderr)
    finally:
        if cg:
            time.sleep(0.2)
            os.rmdir(cg)
    ratio = {k: statistics.median(x["before"][k] / x["after"][k] for x in rounds)
             for k in ("p50", "p99")}
    span = {k: [min(x["before"][k] / x["after"][k] for x in rounds),
                max(x["before"][k] / x["after"][k] for x in rounds)] for k in ("p50", "p99")}
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "")
    out = {"model": os.path.basename(a.model), "limit": a.limit,
           "limit_value": a.cpus if a.limit == "affinity" else a.quota,
           "pinned": a.limit == "cgroup" and a.pin,
           "cpu": cpu, "date": time.strftime("%Y-%m-%d"), "rounds": rounds,
           "threads_before": rounds[0]["before"]["threads"],
           "threads_after": rounds[0]["after"]["threads"], "ratio": ratio, "range": span}
    if a.out:
        json.dump(out, open(a.out, "w"), indent=1)
    return out


def render(res):
    lim = (f"taskset -c {res['limit_value']}" if res["limit"] == "affinity"
           else f"cgroup quota {res['limit_value']} CPUs" + (", pinned" if res.get("pinned") else ""))
    p = lambda k: (f"{res['ratio'][k]:.2f}x [{res['range'][k][0]:.2f}-{res['range'][k][1]:.2f}]")
    med = lambda w, k: statistics.median(r[w][k] for r in res["rounds"])
    return (f"| {res['model']}, {lim} | {res['threads_before']} -> {res['threads_after']} | "
            f"{med('before', 'p50'):.1f} -> {med('after', 'p50'):.1f} ms | {p('p50')} | "
            f"{med('before', 'p99'):.1f} -> {med('after', 'p99'):.1f} ms | {p('p99')} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kiln", nargs="?")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--limit", choices=["affinity", "cgroup"], default="affinity")
    ap.add_argument("--cpus", default="0")
    ap.add_argument("--quota", type=float, default=1.0)
    ap.add_argument("--before-threads", type=int, default=0,
                    help="the thread count before (default: this machine's physical cores); "
                         "e.g. 16 for what a 16-core host's default gave inside the limit")
    ap.add_argument("--pin", action="store_true",
                    help="with --limit cgroup: also taskset -c CPUS (keeps other load off)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--out")
    ap.add_argument("--render", nargs="*")
    a = ap.parse_args()
    if a.render:
        print("| model, limit | threads before -> after | p50 | p50 before/after | p99 | "
              "p99 before/after |\n|---|---|---|---|---|---|")
        for path in a.render:
            print(render(json.load(open(path))))
        return
    print(render(run(a)))


if __name__ == "__main__":
    main()
