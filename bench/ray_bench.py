#!/usr/bin/python3
"""kiln.ray against `kiln run --images` on the same photos and cores, and the capacity table.

usage: bench/ray_bench.py --render RESULTS.json   (the tables of docs/ray.md)
       bench/ray_bench.py [--count 1000] [--rounds 3] [--memory-count 5000] [--no-capacity]
           [--workdir bench/.work/ray] [--out bench/results/ray_<date>.json]

 1. Photos: --count files from tests/ray/make_photos.py (640x480 and 1024x768, scikit-image's
    photographs cropped, flipped, noised, JPEG q75-95 and one PNG in ten), made once.
 2. Models: MobileNetV2 and ResNet-50 (torchvision, seeded random weights, BatchNorm calibrated:
    tests/models/make_torchvision_refs.py), and their int8 QDQ forms (`kiln quantize`, 300
    calibration photos, defaults) for the capacity table.
 3. A local Ray cluster (`ray start --head --num-cpus N`, N = this machine's CPUs) started once;
    each kiln.ray job connects to it with --address (an existing cluster, as in production).
 4. Rounds, alternating which goes first: `kiln run MODEL --images DIR --batch 32 --threads N
    --workers N` and `python -m kiln.ray MODEL --images DIR --batch 32 --actors N
    --cpus-per-actor 1` (MobileNetV2 fp32). Figures per round:
    - job images/s: kiln run's summary (from the first batch requested to the last record) and
      kiln.ray's (from the Ray dataset's start to the last part committed: actor start-up,
      model load and the first plan included); their ratio is the headline;
    - process images/s: each command's whole wall time (Python, Ray's connection, model load);
    - steady images/s: kiln run's steady state, and kiln.ray's images after the first part over
      the time after it started;
    - the Ray path's overheads: start-up (job start to the first part's start), and per part
      the actors' idle time between parts ((actors x (wall - start-up) - busy) / parts).
    Medians over rounds of the per-round ratios.
 5. Memory: one kiln.ray job over --memory-count images (the photos listed several times via a
    list file); each actor's RSS after every part it committed; flat = last within 10 % of the
    first.
 6. Capacity: one kiln.ray job per model and precision (fp32, int8) over the photos; images/s per
    node (this machine), per core, and the nodes of this kind for 10^9 images in 24 hours.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "pyenv"))
import check_venv  # noqa: E402


def sh(cmd, **kw):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    return r, time.perf_counter() - t0


def kiln_run(kiln, model, images, threads, work):
    out = os.path.join(work, "kiln_run.jsonl")
    r, wall = sh([kiln, "run", model, "--images", images, "--out", out, "--batch", "32",
                  "--threads", str(threads), "--workers", str(threads)])
    text = r.stdout
    done = int(text.split("done: ")[1].split(" images")[0])
    ips = float(text.split(" s: ")[1].split(" images/s")[0])
    steady = float(text.split("steady state: ")[1].split(" images/s")[0])
    return {"images": done, "images_per_s": ips, "steady_images_per_s": steady,
            "process_images_per_s": done / wall, "process_s": wall}


def ray_job(py, env, model, images, address, threads, work, tag, extra=()):
    out = os.path.join(work, f"ray_{tag}")
    summary = out + ".json"
    _, wall = sh([py, "-m", "kiln.ray", model, "--images", images, "--out", out, "--batch", "32",
                  "--actors", str(threads), "--cpus-per-actor", "1", "--address", address,
                  "--overwrite", "--json", summary] + list(extra), env=env)
    s = json.load(open(summary))
    start = s["first_part_start_s"]
    parts = s["parts"]
    idle = s["actors"] * (s["wall_s"] - start) - s["actor_busy_s"]
    s.update({"process_s": wall, "process_images_per_s": s["done"] / wall,
              "startup_s": start, "idle_per_part_s": idle / parts})
    return s


def render(res):
    """The tables of docs/ray.md, from a results file."""
    m = res["median"]
    cpu = res["machine"]["cpu"]
    name = f"{cpu.get('model', 'CPU')} ({cpu.get('onednn_isa', '?')}, int8 {cpu.get('int8', '?')})"
    lines = [f"{res['date'][:10]}, {name} ({res['machine']['cpus']} CPUs), MobileNetV2 fp32, "
             f"batch 32, {res['photos']['count']} photos ({res['photos']['sizes']}); "
             f"`kiln run --images --threads {res['settings']['threads']} --workers "
             f"{res['settings']['workers']}` against `python -m kiln.ray --actors "
             f"{res['settings']['actors']} --cpus-per-actor 1` on a running local cluster; "
             f"{len(res['rounds'])} rounds, order alternating, median of per-round ratios "
             "[range].", "",
             "| figure | kiln run | kiln.ray | ratio |", "|---|---|---|---|"]
    rng = lambda k: (f"[{min(r[k] for r in res['rounds']):.2f}-"  # noqa: E731
                     f"{max(r[k] for r in res['rounds']):.2f}]")
    med = lambda who, k: statistics.median(r[who][k] for r in res["rounds"])  # noqa: E731
    lines += [
        f"| job images/s (clock: first batch / dataset start to last record) | "
        f"{med('kiln_run', 'images_per_s'):.1f} | {med('kiln_ray', 'images_per_s'):.1f} | "
        f"**{m['job_ratio']:.2f}x** {rng('job_ratio')} |",
        f"| process images/s (whole command, Python and Ray's connection included) | "
        f"{med('kiln_run', 'process_images_per_s'):.1f} | "
        f"{med('kiln_ray', 'process_images_per_s'):.1f} | {m['process_ratio']:.2f}x "
        f"{rng('process_ratio')} |",
        f"| steady images/s (after the first batch / every actor's first part) | "
        f"{med('kiln_run', 'steady_images_per_s'):.1f} | "
        f"{med('kiln_ray', 'steady_images_per_s'):.1f} | {m['steady_ratio']:.2f}x "
        f"{rng('steady_ratio')} |", "",
        f"The Ray path's overheads (medians): start-up {m['startup_s']:.2f} s from the dataset's "
        f"start to the first part's (actor processes, `import ray.data`, model load); actors "
        f"idle {m['idle_per_part_s'] * 1e3:.0f} ms per part between parts (Ray's dispatch), "
        f"{m['idle_per_part_s'] * 1e3 / (res['rounds'][0]['kiln_ray']['images'] / res['rounds'][0]['kiln_ray']['parts'] / 32):.0f}"
        " ms per batch of 32."]
    mem = res.get("memory")
    if mem:
        lines += ["", f"Memory: one job over {mem['images']} images ({mem['images_per_s']:.1f} "
                  f"images/s); each actor's RSS after its first and last part (MiB): " +
                  ", ".join(f"{v[0]:.0f} -> {v[-1]:.0f} (max {max(v):.0f})"
                            for v in mem["rss_per_actor_mib"].values()) +
                  f"; largest growth first to last {mem['max_growth_first_to_last'] * 100:.1f} %."]
    cap = res.get("capacity")
    if cap:
        cpus = res["machine"]["cpus"]
        lines += ["", f"| model | images/s, this {cpus}-CPU node (job) | steady | per core | "
                  f"nodes like this for 10^9 images in 24 h | 32-core nodes (per-core rate x 32, "
                  "assumed) |", "|---|---|---|---|---|---|"]
        for k, v in cap.items():
            core = v["steady_images_per_s_node"] / cpus
            lines.append(f"| {k.replace('_', ' ')} | {v['images_per_s_node']:.1f} | "
                         f"{v['steady_images_per_s_node']:.1f} | {core:.1f} | "
                         f"{v['nodes_for_1e9_per_day']:,.0f} | {1e9 / 86400 / (core * 32):,.0f} |")
    return "\n".join(lines)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        print(render(json.load(open(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-count", type=int, default=5000)
    ap.add_argument("--no-capacity", action="store_true")
    ap.add_argument("--workdir", default=os.path.join(REPO, "bench", ".work", "ray"))
    ap.add_argument("--kiln", default=os.path.join(REPO, "build", "release", "tools", "kiln",
                                                    "kiln"))
    ap.add_argument("--python-dir", default=os.path.join(REPO, "build", "release", "python"))
    ap.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", f"ray_{datetime.date.today().isoformat()}.json"))
    a = ap.parse_args()
    work = os.path.abspath(a.workdir)
    os.makedirs(work, exist_ok=True)
    threads = len(os.sched_getaffinity(0))
    py = check_venv.ray_venv()
    # A local cluster without token authentication (ray start enables it by default in 2.60).
    env = dict(os.environ, PYTHONPATH=a.python_dir, RAY_AUTH_MODE="disabled")

    photos = os.path.join(work, f"photos-{a.count}")
    if not os.path.exists(photos + ".done"):
        sh(["/usr/bin/python3", os.path.join(REPO, "tests", "ray", "make_photos.py"), photos,
            str(a.count), "--sizes", "640x480,1024x768"])
        open(photos + ".done", "w").close()
    zoo = os.environ.get("KILN_TORCHVISION_DIR",
                         os.path.join(REPO, "build", "release", "torchvision_models_calibrated"))
    models = {m: os.path.join(zoo, f"{m}_op17.onnx") for m in ("mobilenet_v2", "resnet50")}
    if not all(os.path.exists(p) for p in models.values()):
        sh(["/usr/bin/python3", os.path.join(REPO, "tests", "models", "make_torchvision_refs.py"),
            zoo, "--models", "mobilenet_v2,resnet50", "--opsets", "17", "--batches", "1",
            "--calibrate-bn"])
    doctor = json.loads(sh([a.kiln, "doctor", "--json"])[0].stdout)

    subprocess.run([os.path.join(os.path.dirname(py), "ray"), "stop", "--force"],
                   capture_output=True)
    sh([os.path.join(os.path.dirname(py), "ray"), "start", "--head", "--num-cpus", str(threads),
        "--include-dashboard=false", "--port", "6390"], env=env)
    address = "127.0.0.1:6390"
    result = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "machine": {"cpu": doctor.get("cpu", {}), "host": platform.node(),
                          "cpus": threads},
              "photos": {"count": a.count, "sizes": "640x480,1024x768"},
              "settings": {"batch": 32, "threads": threads, "workers": threads,
                           "actors": threads, "cpus_per_actor": 1}, "rounds": []}
    try:
        mb = models["mobilenet_v2"]
        for rnd in range(a.rounds):
            order = ["kiln", "ray"] if rnd % 2 == 0 else ["ray", "kiln"]
            got = {}
            for who in order:
                got[who] = (kiln_run(a.kiln, mb, photos, threads, work) if who == "kiln" else
                            ray_job(py, env, mb, photos, address, threads, work, "mb"))
            k, r = got["kiln"], got["ray"]
            rr = {"order": order, "kiln_run": k, "kiln_ray": r,
                  "job_ratio": r["images_per_s"] / k["images_per_s"],
                  "process_ratio": r["process_images_per_s"] / k["process_images_per_s"],
                  "steady_ratio": r["steady_images_per_s"] / k["steady_images_per_s"]}
            result["rounds"].append(rr)
            print(f"round {rnd + 1}: kiln run {k['images_per_s']:.1f} images/s, kiln.ray "
                  f"{r['images_per_s']:.1f} (job {rr['job_ratio']:.3f}x, process "
                  f"{rr['process_ratio']:.3f}x, steady {rr['steady_ratio']:.3f}x); start-up "
                  f"{r['startup_s']:.2f} s, idle per part {r['idle_per_part_s'] * 1e3:.0f} ms",
                  flush=True)
        med = lambda key: statistics.median(x[key] for x in result["rounds"])  # noqa: E731
        result["median"] = {
            "job_ratio": med("job_ratio"), "process_ratio": med("process_ratio"),
            "steady_ratio": med("steady_ratio"),
            "kiln_run_images_per_s": statistics.median(
                x["kiln_run"]["images_per_s"] for x in result["rounds"]),
            "kiln_ray_images_per_s": statistics.median(
                x["kiln_ray"]["images_per_s"] for x in result["rounds"]),
            "startup_s": statistics.median(x["kiln_ray"]["startup_s"] for x in result["rounds"]),
            "idle_per_part_s": statistics.median(
                x["kiln_ray"]["idle_per_part_s"] for x in result["rounds"])}
        print("median:", json.dumps(result["median"]), flush=True)

        # Memory: the photos listed --memory-count / --count times.
        listing = os.path.join(work, "memory.list")
        files = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(photos) for f in fs)
        with open(listing, "w") as f:
            for i in range(a.memory_count):
                f.write(files[i % len(files)] + "\n")
        m = ray_job(py, env, mb, listing, address, threads, work, "memory")
        per_actor = {}
        stats = json.load(open(os.path.join(work, "ray_memory.json")))
        for pid, rss in zip(stats.get("actor_pids", []), stats["rss_bytes"]):
            per_actor.setdefault(pid, []).append(rss)
        result["memory"] = {"images": m["done"], "images_per_s": m["images_per_s"],
                            "rss_per_actor_mib": {str(p): [round(v / 2**20, 1) for v in vals]
                                                  for p, vals in per_actor.items()}}
        growth = [vals[-1] / vals[0] - 1 for vals in per_actor.values() if len(vals) > 1]
        result["memory"]["max_growth_first_to_last"] = max(growth) if growth else None
        print("memory:", json.dumps({k: v for k, v in result["memory"].items()
                                     if k != "rss_per_actor_mib"}), flush=True)

        if not a.no_capacity:
            cap = {}
            for name, path in models.items():
                q = os.path.join(work, f"{name}_int8.onnx")
                if not os.path.exists(q):
                    sh([a.kiln, "quantize", path, "--calibrate", photos, "--out", q])
                for prec, p in (("fp32", path), ("int8", q)):
                    s = ray_job(py, env, p, photos, address, threads, work, f"{name}_{prec}")
                    rate = s["images_per_s"]
                    cap[f"{name}_{prec}"] = {
                        "images_per_s_node": rate, "images_per_s_core": rate / threads,
                        "steady_images_per_s_node": s["steady_images_per_s"],
                        "nodes_for_1e9_per_day": 1e9 / 86400 / s["steady_images_per_s"]}
                    print(f"capacity {name} {prec}: {rate:.1f} images/s per node "
                          f"(steady {s['steady_images_per_s']:.1f})", flush=True)
            result["capacity"] = cap
    finally:
        subprocess.run([os.path.join(os.path.dirname(py), "ray"), "stop", "--force"],
                       capture_output=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
