"""kiln.ray on a real Ray cluster of three nodes on this machine, with one worker node killed.

usage: ray_test.py REPO BUILD_PYTHON_DIR KILN_CLI WORKDIR

Runs in kiln.ray's venv (tests/pyenv/check_venv.py RAY_PINS; an unreachable package index is a
skip, a failure under CI). The reference for every record is `kiln run --images` on the same
files: top-k classes equal, scores within 1e-5 (both are kiln's decoders and model; the two paths
differ only in batching and threads).

 1. Predictor, called directly: a batch of encoded bytes with corrupt ones (error records, never
    an exception), the same images as decoded uint8 arrays (read_images' column), a batch with
    no image column (InvalidArgument).
 2. Your own pipeline: ray.data.read_binary_files(include_paths=True) -> map_batches(Predictor,
    ActorPoolStrategy) on a local Ray instance.
 3. The job under a fault: ray.cluster_utils.Cluster with a head and two worker nodes (1 CPU
    each); `python -m kiln.ray` over 1,000 photos derived from scikit-image's (tests/ray/
    make_photos.py) plus 20 corrupt files, 2 actors, parts of 20 images. Once 5 parts are
    committed, the worker node hosting one of the actors is killed (its raylet and workers). The
    job must end with exit 0 and every input exactly once in the output, corrupt files as error
    records, every other record equal to the reference.
 4. Resume: the same command again commits nothing new (the part files are untouched); with two
    part files deleted it commits exactly those; other settings on the same folder are refused.
"""
import collections
import json
import os
import subprocess
import sys
import threading
import time

REPO, BUILD_PY, KILN, WORK = (os.path.abspath(a) for a in sys.argv[1:5])
sys.path.insert(0, os.path.join(REPO, "tests", "pyenv"))
import check_venv  # noqa: E402

if os.environ.get("KILN_IN_RAY_VENV") != "1":
    py = check_venv.ray_venv()
    env = dict(os.environ, KILN_IN_RAY_VENV="1", PYTHONPATH=BUILD_PY, PYTHONDONTWRITEBYTECODE="1",
               RAY_DEDUP_LOGS="0")
    sys.exit(subprocess.run([py, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)

import numpy as np  # noqa: E402
import ray  # noqa: E402

import kiln  # noqa: E402
import kiln.ray as kray  # noqa: E402

failures = []


def check(ok, what):
    print(("PASS: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def setup():
    os.makedirs(WORK, exist_ok=True)
    photos = os.path.join(WORK, "photos")
    stamp = os.path.join(WORK, "photos.done")
    if not os.path.exists(stamp):
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "ray", "make_photos.py"),
                        photos, "1000", "--sizes", "320x240,400x300,480x360", "--corrupt", "20"],
                       check=True, stdout=subprocess.DEVNULL)
        open(stamp, "w").close()
    zoo = os.environ.get("KILN_TORCHVISION_DIR") or os.path.join(WORK, "models")
    model = os.path.join(zoo, "mobilenet_v2_op17.onnx")
    if not os.path.exists(model):
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "models",
                                                         "make_torchvision_refs.py"), zoo,
                        "--models", "mobilenet_v2", "--opsets", "17", "--batches", "1",
                        "--calibrate-bn"], check=True, stdout=subprocess.DEVNULL)
    ref = os.path.join(WORK, "reference.jsonl")
    subprocess.run([KILN, "run", model, "--images", photos, "--out", ref, "--batch", "32",
                    "--threads", "2"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    want = {}
    for line in open(ref):
        r = json.loads(line)
        want[os.path.abspath(r["path"])] = r
    return photos, model, want


def same_as_reference(records, want, what):
    """records: dicts with path, error, top_k, scores."""
    bad = []
    for r in records:
        w = want.get(r["path"])
        if w is None:
            bad.append(f"{r['path']}: not in the reference")
        elif bool(r["error"]) != ("error" in w):
            bad.append(f"{r['path']}: error '{r['error']}' vs reference {w.get('error')}")
        elif not r["error"] and (list(r["top_k"]) != w["top_k"] or
                                 max(abs(a - b) for a, b in zip(r["scores"], w["scores"])) > 1e-5):
            bad.append(f"{r['path']}: {list(r['top_k'])} {list(r['scores'])} vs {w['top_k']} "
                       f"{w['scores']}")
    check(not bad, f"{what}: {len(records)} records equal `kiln run --images`'s"
          + (f"; {len(bad)} differ, first {bad[:3]}" if bad else ""))


def predictor_direct(photos, model, want):
    from PIL import Image
    paths = sorted(want)[:30] + sorted(want)[-10:]  # the last 10 are bad/ files
    p = kray.Predictor(model, threads=2)
    blobs = [open(x, "rb").read() for x in paths]
    rec = p({"bytes": np.array(blobs, dtype=object), "path": np.array(paths)})
    rows = [dict(zip(rec, v)) for v in zip(*rec.values())]
    same_as_reference(rows, want, "Predictor on encoded bytes (corrupt ones among them)")
    check(sum(1 for r in rows if r["status"] == "error") == sum(1 for x in paths if "error" in want[x])
          and all(r["error"] for r in rows if r["status"] == "error"),
          "Predictor: corrupt images are error records with the reason")
    good = [x for x in paths if "error" not in want[x]]
    arrays = [np.asarray(Image.open(x).convert("RGB")) for x in good]
    rec2 = p({"image": arrays, "path": np.array(good)})
    rows2 = [dict(zip(rec2, v)) for v in zip(*rec2.values())]
    same_as_reference(rows2, want, "Predictor on decoded uint8 arrays (read_images' column)")
    try:
        p({"pixels": np.zeros(2)})
        check(False, "Predictor: a batch without an image column raises InvalidArgument")
    except kiln.InvalidArgument as e:
        check("'bytes'" in str(e), f"Predictor: a batch without an image column raises: {e}")


def own_pipeline(photos, model, want):
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        files = sorted(want)[:200]
        ds = ray.data.read_binary_files(files, include_paths=True)
        ds = ds.map_batches(kray.Predictor, fn_constructor_kwargs={"model": model},
                            batch_size=32, num_cpus=1, compute=ray.data.ActorPoolStrategy(size=1))
        rows = ds.take_all()
        same_as_reference(rows, want, "read_binary_files -> map_batches(Predictor)")
        check(sorted(r["path"] for r in rows) == files, "own pipeline: every file once")
    finally:
        ray.shutdown()


def job_cmd(model, photos, out, address, *extra):
    return [sys.executable, "-m", "kiln.ray", model, "--images", photos, "--out", out,
            "--address", address, "--actors", "2", "--part-size", "20", "--batch", "16",
            "--json", out + ".summary.json"] + list(extra)


def exactly_once(out, want, what):
    table = kray.read_records(out)
    rows = table.to_pylist()
    counts = collections.Counter(r["path"] for r in rows)
    dup = [p for p, c in counts.items() if c > 1]
    lost = sorted(set(want) - set(counts))
    check(not dup and not lost and len(rows) == len(want),
          f"{what}: {len(rows)} records for {len(want)} inputs, {len(dup)} duplicated, "
          f"{len(lost)} lost")
    errors = [r for r in rows if r["status"] == "error"]
    check(len(errors) == 20 and all("/bad/" in r["path"] and r["error"] for r in errors),
          f"{what}: the 20 corrupt files are error records ({len(errors)} errors)")
    same_as_reference(rows, want, what)


def raylet_pid(node):
    return node.all_processes["raylet"][0].process.pid


def actor_hosts():
    """The parent pids (raylets) of the live PartWriter actor processes (Ray titles an actor's
    process "ray::<class>"; a node's workers are its raylet's children)."""
    parents = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if b"PartWriter" in cmd and cmd.startswith(b"ray::"):
                stat = open(f"/proc/{pid}/stat").read()
                parents.add(int(stat.rsplit(")", 1)[1].split()[1]))
        except OSError:
            continue
    return parents


def fault_job(cluster, photos, model, want):
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    out = os.path.join(WORK, "job")
    subprocess.run(["rm", "-rf", out, out + ".summary.json"])
    log = open(os.path.join(WORK, "job.log"), "w")
    t0 = time.time()
    job = subprocess.Popen(job_cmd(model, photos, out, cluster.address), stdout=log,
                           stderr=subprocess.STDOUT)
    killed = None
    parts_at_kill = 0
    while job.poll() is None and killed is None and time.time() - t0 < 300:
        committed = [n for n in os.listdir(out) if n.startswith("part-")] \
            if os.path.isdir(out) else []
        if len(committed) >= 5:
            hosts = actor_hosts()
            target = next((w for w in workers if raylet_pid(w) in hosts), None)
            if target is not None:
                parts_at_kill = len(committed)
                killed = raylet_pid(target)
                cluster.remove_node(target, allow_graceful=False)
                print(f"killed the worker node of raylet {killed} (hosting an actor) with "
                      f"{parts_at_kill} of 51 parts committed, {time.time() - t0:.1f} s in",
                      flush=True)
        time.sleep(0.2)
    try:
        rc = job.wait(timeout=max(360 - (time.time() - t0), 10))
    except subprocess.TimeoutExpired:
        job.kill()
        rc = "timeout"
    log.close()
    print(open(os.path.join(WORK, "job.log")).read()[-1500:])
    check(killed is not None and 0 < parts_at_kill < 51,
          f"a worker node hosting an actor was killed mid-job ({parts_at_kill} of 51 parts "
          "committed)")
    check(rc == 0, f"the job finished after the node was lost (exit {rc}, "
          f"{time.time() - t0:.1f} s)")
    exactly_once(out, want, "job with a worker node killed")
    s = json.load(open(out + ".summary.json"))
    print(f"actors that committed parts (pid, started, ready; s after the job's start): "
          f"{s['actor_start_s']}")
    return out


def resume(cluster, photos, model, want, out):
    names = sorted(n for n in os.listdir(out) if n.startswith("part-"))
    mtimes = {n: os.stat(os.path.join(out, n)).st_mtime_ns for n in names}
    r = subprocess.run(job_cmd(model, photos, out, cluster.address), capture_output=True,
                       text=True)
    s = json.load(open(out + ".summary.json"))
    check(r.returncode == 0 and s["done"] == 0 and s["skipped"] == len(want) and
          all(os.stat(os.path.join(out, n)).st_mtime_ns == mtimes[n] for n in names),
          f"a rerun commits nothing and touches no part (done {s['done']}, skipped "
          f"{s['skipped']})")
    for n in names[3:5]:
        os.remove(os.path.join(out, n))
    r = subprocess.run(job_cmd(model, photos, out, cluster.address), capture_output=True,
                       text=True)
    s = json.load(open(out + ".summary.json"))
    check(r.returncode == 0 and s["done"] == 40 and s["skipped"] == len(want) - 40,
          f"a rerun with 2 parts deleted commits those 40 images (done {s['done']})")
    exactly_once(out, want, "resumed job")
    r = subprocess.run(job_cmd(model, photos, out, cluster.address, "--top-k", "3"),
                       capture_output=True, text=True)
    check(r.returncode == 1 and "other settings" in r.stderr,
          f"other settings on the same folder are refused: {r.stderr.strip()[-200:]}")


def bad_input(photos, model):
    """Settings that are wrong fail before Ray starts, with kiln's message and exit 1."""
    out = os.path.join(WORK, "bad_out")
    cases = [(["--images", os.path.join(WORK, "no-such-folder")], "does not exist"),
             (["--images", photos, "--labels", os.path.join(WORK, "three.txt")],
              "has 3 names but the model has 1000 classes"),
             (["--images", photos, "--recipe", "no-such-preset"], "unknown recipe preset")]
    open(os.path.join(WORK, "three.txt"), "w").write("a\nb\nc\n")
    for args, phrase in cases:
        r = subprocess.run([sys.executable, "-m", "kiln.ray", model, "--out", out] + args,
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 1 and phrase in r.stderr,
              f"bad input {args[-1]!r}: exit {r.returncode}, '{r.stderr.strip()[-160:]}'")


def main():
    photos, model, want = setup()
    bad_input(photos, model)
    check(len(want) == 1020, f"{len(want)} inputs (1,000 photos + 20 corrupt files)")
    predictor_direct(photos, model, want)
    own_pipeline(photos, model, want)
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                            "include_dashboard": False})
    try:
        out = fault_job(cluster, photos, model, want)
        resume(cluster, photos, model, want, out)
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
