"""kiln as the model stage of Ray Data: offline batch inference over many machines.

Two levels (docs/ray.md has the guide):

- `Predictor`, a callable class for `Dataset.map_batches(Predictor, fn_constructor_kwargs=...,
  compute=ray.data.ActorPoolStrategy(size=N), num_cpus=C, batch_size=B)` in your own pipeline.
  Each actor opens one kiln.Session (C compute threads: the CPUs Ray gave the actor), takes
  batches of encoded image bytes (the "bytes" column of `ray.data.read_binary_files`) or decoded
  arrays (the "image" column of `ray.data.read_images`), decodes and preprocesses them with
  kiln's C++ decoders and recipes (kiln.ImageDecoder, the GIL released; never PIL), runs the
  model and returns one record per image: path, status, top_k, scores, labels (classifiers), or
  the image's outputs (other models), and error. A corrupt image is an error record, never a
  failed task.
- `run_job()` and `python -m kiln.ray MODEL --images URI --out DIR`, the whole job: lists the
  images (a local folder or list file, or any filesystem pyarrow gives Ray: s3://, gs://,
  hdfs://), splits the sorted listing into parts of --part-size images (kept in DIR's manifest,
  so a part always holds the same files), and lets an actor pool read, classify and commit each
  part as one Parquet (or JSON Lines) file named after the part. A part's file is written under
  a temporary name and renamed when complete (object stores: one PUT, also all or nothing), so a
  retried task rewrites the same name: no record is lost or duplicated. A rerun skips committed
  parts (resume), and parts a failed Ray run left undone are run again by the driver (up to
  --attempts rounds), so a lost node costs time, not records.

Threads: a Predictor uses the CPUs Ray assigned to its actor (num_cpus) for both compute and
decoding; it does not start more threads than that.
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import kiln

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")
MANIFEST = "_kiln_manifest.json"
PARTS = "_kiln_parts.jsonl"

__all__ = ["Predictor", "run_job", "list_images", "read_records", "IMAGE_EXTENSIONS"]


def _assigned_cpus() -> int:
    """The CPUs Ray assigned to this actor or task (at least 1); outside Ray, the CPUs this
    process may run on."""
    try:
        import ray
        if ray.is_initialized():
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0)
            if cpus >= 1:
                return int(cpus)
    except Exception:  # outside a Ray worker
        pass
    return max(len(os.sched_getaffinity(0)), 1)


def _process_start_time() -> float:
    """This process's start, in time.time() seconds (from /proc)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Predictor:
    """A model stage for `Dataset.map_batches` (one instance per actor).

    Predictor(model, recipe="", labels=None, top_k=5, threads=None, device="cpu",
              precision="fp32")
    model: an ONNX file (on a filesystem every node sees). recipe: as `kiln run --images --recipe`
    ("" picks torchvision-imagenet for a fixed-size RGB input). labels: a labels file (one class
    name per line) or a list. threads: compute and decode threads (None: the actor's CPUs).

    __call__(batch) takes a dict of columns with "bytes" (encoded images) or "image" (uint8
    arrays), and optionally "path"; it returns the record columns: path, status ("ok" or
    "error"), error ("" when ok), and top_k, scores (and labels) for a classifier (first output
    [N, classes]) or one column per output for other models (each image's slice of it).
    """

    def __init__(self, model: str, recipe: str = "", labels: Any = None, top_k: int = 5,
                 threads: Optional[int] = None, device: str = "cpu", precision: str = "fp32"):
        self.threads = int(threads or _assigned_cpus())
        self.session = kiln.Session(os.fspath(model), device=device, precision=precision,
                                    threads=self.threads)
        self.decoder = kiln.ImageDecoder(recipe, session=self.session, threads=self.threads)
        self.input = self.session.inputs[0]
        fixed = self.input.shape[0] if self.input.shape else None
        self.fixed_batch = fixed if isinstance(fixed, int) and fixed > 0 else 0
        out = self.session.outputs[0]
        self.classifier = out.shape is not None and len(out.shape) == 2
        if isinstance(labels, (str, os.PathLike)):
            with open(labels) as f:
                labels = [line.rstrip("\r\n") for line in f]
            while labels and not labels[-1]:
                labels.pop()
        self.labels = list(labels) if labels else None
        if top_k < 1:
            raise kiln.InvalidArgument(f"top_k must be >= 1; got {top_k}")
        self.top_k = top_k
        self.stats = {"decode_s": 0.0, "compute_s": 0.0, "images": 0, "failed": 0}

    def _run(self, x: np.ndarray) -> List[np.ndarray]:
        """The model's outputs for a float batch, in runs of the fixed batch dim when it has one
        (the last run padded with zeros)."""
        if not self.fixed_batch:
            return list(self.session.run({self.input.name: x}).values())
        pieces = []
        for at in range(0, len(x), self.fixed_batch):
            chunk = x[at:at + self.fixed_batch]
            n = len(chunk)
            if n < self.fixed_batch:
                pad = np.zeros((self.fixed_batch,) + chunk.shape[1:], np.float32)
                pad[:n] = chunk
                chunk = pad
            pieces.append([o[:n] for o in self.session.run({self.input.name: chunk}).values()])
        return [np.concatenate([p[i] for p in pieces]) for i in range(len(pieces[0]))]

    def predict(self, images: Sequence[Any], paths: Optional[Sequence[str]] = None,
                errors: Optional[Sequence[str]] = None) -> Dict[str, list]:
        """Records (columns of lists) for encoded images (bytes-like) or uint8 arrays. errors[i],
        when given and non-empty, is why image i could not be read (it is not decoded)."""
        n = len(images)
        paths = list(paths) if paths is not None else [""] * n
        errs = [e or "" for e in errors] if errors is not None else [""] * n
        todo = [i for i in range(n) if not errs[i]]
        t0 = time.perf_counter()
        batch = np.zeros((0,), np.float32)
        if todo:
            pick = [images[i] for i in todo]
            if isinstance(pick[0], np.ndarray) and pick[0].dtype == np.uint8 and pick[0].ndim >= 2:
                batch, derr = self.decoder.transform(pick)
            else:
                batch, derr = self.decoder.decode(pick)
            for i, e in zip(todo, derr):
                errs[i] = e
        good = [k for k, i in enumerate(todo) if not errs[i]]
        t1 = time.perf_counter()
        outputs = self._run(batch[good]) if good else []
        t2 = time.perf_counter()
        self.stats["decode_s"] += t1 - t0
        self.stats["compute_s"] += t2 - t1
        self.stats["images"] += n
        self.stats["failed"] += sum(1 for e in errs if e)
        rows = {i: r for r, i in enumerate(todo[k] for k in good)}
        rec: Dict[str, list] = {"path": paths, "status": ["error" if e else "ok" for e in errs],
                                "error": errs}
        if self.classifier:
            idx, sc = kiln.top_k(outputs[0], self.top_k) if good else (None, None)
            rec["top_k"] = [idx[rows[i]].tolist() if i in rows else [] for i in range(n)]
            rec["scores"] = [sc[rows[i]].tolist() if i in rows else [] for i in range(n)]
            if self.labels is not None:
                rec["labels"] = [[self.labels[c] for c in t] for t in rec["top_k"]]
        else:
            for info, o in zip(self.session.outputs, outputs or [None] * len(self.session.outputs)):
                rec[info.name] = [o[rows[i]] if i in rows else None for i in range(n)]
        return rec

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        if "bytes" in batch:
            images = list(batch["bytes"])
        elif "image" in batch:
            images = list(batch["image"])
        else:
            raise kiln.InvalidArgument("a batch needs a 'bytes' column (ray.data.read_binary_files)"
                                       " or an 'image' column (ray.data.read_images); got "
                                       + ", ".join(batch))
        paths = [str(p) for p in batch["path"]] if "path" in batch else None
        rec = self.predict(images, paths)
        out = {}
        for k, v in rec.items():
            col = np.empty(len(v), dtype=object)
            col[:] = v
            out[k] = col
        return out


# ---- listing and the manifest --------------------------------------------------------------


def _filesystem(uri: str):
    """(pyarrow filesystem, path within it) for a local path or a URI such as s3://b/k."""
    import pyarrow.fs as pafs
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def _full(fs, path: str, uri: str) -> str:
    """The name a record carries: the local path, or the URI of a remote file."""
    if fs.type_name == "local":
        return path
    scheme = uri.split("://", 1)[0]
    return f"{scheme}://{path}"


def list_images(uri: str) -> List[str]:
    """The images of a folder (recursively: .jpg, .jpeg, .png in any case) or of a list file (one
    path per line, relative to its folder, '#' comments), sorted, as `kiln run --images` lists
    them; local paths or URIs."""
    import pyarrow.fs as pafs
    fs, root = _filesystem(uri)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.NotFound:
        raise kiln.NotFound(f"image directory or list '{uri}' does not exist")
    if info.type == pafs.FileType.Directory:
        found = fs.get_file_info(pafs.FileSelector(root, recursive=True))
        files = sorted(_full(fs, f.path, uri) for f in found if f.type == pafs.FileType.File
                       and f.path.lower().endswith(IMAGE_EXTENSIONS))
        if not files:
            raise kiln.InvalidArgument(f"no .jpg, .jpeg or .png files found under '{uri}'")
        return files
    with fs.open_input_stream(root) as f:
        text = f.read().decode()
    base = root.rsplit("/", 1)[0] if "/" in root else ""
    files = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "://" in line or line.startswith("/"):
            files.append(line)
        else:
            files.append(_full(fs, f"{base}/{line}" if base else line, uri))
    if not files:
        raise kiln.InvalidArgument(f"image list '{uri}' names no files")
    return files


class _Out:
    """The output folder: committed parts, the manifest, atomic writes."""

    def __init__(self, uri: str):
        self.uri = uri
        self.fs, self.root = _filesystem(uri)
        self.fs.create_dir(self.root, recursive=True)
        # Local and HDFS files are written under a temporary name and renamed; an object store's
        # PUT is already all or nothing (and its "rename" is a copy), so objects are written once.
        self.rename = self.fs.type_name in ("local", "hdfs")

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def exists(self, name: str) -> bool:
        import pyarrow.fs as pafs
        return self.fs.get_file_info(self.path(name)).type == pafs.FileType.File

    def read(self, name: str) -> bytes:
        with self.fs.open_input_stream(self.path(name)) as f:
            return f.read()

    def write(self, name: str, write_fn) -> None:
        """Commits `name` whole: write_fn(stream) writes it."""
        final = self.path(name)
        target = f"{self.root}/.{name}.tmp-{uuid.uuid4().hex}" if self.rename else final
        with self.fs.open_output_stream(target) as f:
            write_fn(f)
        if self.rename:
            if self.fs.type_name == "local":
                os.replace(target, final)  # atomic, and replaces a copy a retry committed
            else:
                self.fs.move(target, final)

    def committed_parts(self, fmt: str) -> set:
        """The indices of the parts committed as `fmt` files (part_name's inverse)."""
        return {int(n[5:13]) for n in self.committed() if n.endswith("." + fmt)}

    def committed(self) -> set:
        import pyarrow.fs as pafs
        names = set()
        for f in self.fs.get_file_info(pafs.FileSelector(self.root)):
            base = f.path.rsplit("/", 1)[-1]
            if f.type == pafs.FileType.File and base.startswith("part-") and "." in base:
                names.add(base)
        return names


def part_name(part: int, fmt: str) -> str:
    return f"part-{part:08d}.{fmt}"


def _plan(out: _Out, files: List[str], settings: Dict[str, Any], part_size: int,
          overwrite: bool) -> List[List[str]]:
    """The parts of the job. A new job splits the sorted listing into parts of `part_size`; a
    rerun keeps its manifest's parts (their files never move between parts) and adds parts for
    files listed now and not before. A manifest written with other settings is refused unless
    `overwrite`, which starts the job anew."""
    if overwrite:
        for name in out.committed() | {MANIFEST, PARTS}:
            if out.exists(name):
                out.fs.delete_file(out.path(name))
    parts: List[List[str]] = []
    if out.exists(MANIFEST):
        old = json.loads(out.read(MANIFEST))
        if old.get("settings") != settings:
            raise kiln.InvalidArgument(
                f"'{out.uri}' holds a job with other settings ({old.get('settings')}); give "
                f"another --out, or --overwrite to start over")
        parts = [json.loads(line)["paths"] for line in out.read(PARTS).decode().splitlines()]
        part_size = old["part_size"]
    known = {p for part in parts for p in part}
    new = [f for f in files if f not in known]
    for at in range(0, len(new), part_size):
        parts.append(new[at:at + part_size])
    if new or not out.exists(MANIFEST):
        lines = "".join(json.dumps({"part": i, "paths": p}) + "\n" for i, p in enumerate(parts))
        out.write(PARTS, lambda f: f.write(lines.encode()))
        manifest = {"version": 1, "settings": settings, "part_size": part_size,
                    "parts": len(parts), "images": sum(len(p) for p in parts)}
        out.write(MANIFEST, lambda f: f.write(json.dumps(manifest, indent=1).encode()))
    return parts


# ---- the job's actor ---------------------------------------------------------------------------


def _records_table(rec: Dict[str, list]):
    import pyarrow as pa
    cols = {}
    for k, v in rec.items():
        if k in ("path", "status", "error"):
            cols[k] = pa.array(v, pa.string())
        elif k == "top_k":
            cols[k] = pa.array(v, pa.list_(pa.int64()))
        elif k == "scores":
            cols[k] = pa.array(v, pa.list_(pa.float32()))
        elif k == "labels":
            cols[k] = pa.array(v, pa.list_(pa.string()))
        else:  # a raw output: each image's values, flattened, and their shape
            cols[k] = pa.array([None if a is None else a.ravel().astype(np.float32) for a in v],
                               pa.list_(pa.float32()))
            cols[k + ".shape"] = pa.array([None if a is None else list(a.shape) for a in v],
                                          pa.list_(pa.int64()))
    return pa.table(cols)


def _path_fields(path: str) -> Dict[str, str]:
    """"path" as `kiln run --images` writes it: a path whose bytes are not UTF-8 (here, with
    os.fsdecode's surrogate escapes) gets U+FFFD for them, and "path_hex", its exact bytes."""
    try:
        path.encode("utf-8")
        return {"path": path}
    except UnicodeEncodeError:
        raw = os.fsencode(path)
        return {"path": raw.decode("utf-8", "replace"), "path_hex": raw.hex()}


def _jsonl(rec: Dict[str, list]) -> bytes:
    """JSON Lines as `kiln run --images` writes them: path, top_k, scores (labels), or error."""
    lines = []
    for i, path in enumerate(rec["path"]):
        r = _path_fields(path)
        if rec["error"][i]:
            r["error"] = rec["error"][i]
        elif "top_k" in rec:
            r.update(top_k=rec["top_k"][i], scores=rec["scores"][i])
            if "labels" in rec:
                r["labels"] = rec["labels"][i]
        else:
            r["outputs"] = {k: v[i].tolist() for k, v in rec.items()
                            if k not in ("path", "status", "error")}
        lines.append(json.dumps(r) + "\n")
    return "".join(lines).encode()


class PartWriter:
    """The job's actor: for each part, reads its files (I/O threads, overlapping decode and
    compute), classifies them in batches with a Predictor and commits the part's file."""

    def __init__(self, predictor: Dict[str, Any], out: str, fmt: str, batch: int,
                 io_threads: int = 4):
        t0 = time.time()
        self.predictor = Predictor(**predictor)
        self.init_s = time.time() - t0
        self.ready = time.time()
        self.born = _process_start_time()
        self.out = _Out(out)
        self.fmt = fmt
        self.batch = batch
        self.io = concurrent.futures.ThreadPoolExecutor(io_threads)
        self.fs = None

    def _read(self, path: str):
        try:
            if "://" in path:
                if self.fs is None:
                    self.fs = _filesystem(path)[0]
                with self.fs.open_input_stream(path.split("://", 1)[1]) as f:
                    return f.read(), ""
            with open(path, "rb") as f:
                return f.read(), ""
        except Exception as e:  # a missing or unreadable file is that image's error record
            return b"", f"NotFound: cannot read image '{path}': {e}"

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        out = {"part": [], "images": [], "failed": [], "busy_s": [], "read_wait_s": [],
               "write_s": [], "rss_bytes": [], "actor": [], "actor_born": [], "actor_init_s": [],
               "actor_ready": [], "start": []}
        for part, paths in zip(batch["part"], batch["paths"]):
            t0 = time.perf_counter()
            paths = [str(p) for p in paths]
            reads = [self.io.submit(self._read, p) for p in paths]
            recs: Dict[str, list] = {}
            wait = 0.0
            for at in range(0, len(paths), self.batch):
                w0 = time.perf_counter()
                got = [r.result() for r in reads[at:at + self.batch]]
                wait += time.perf_counter() - w0
                rec = self.predictor.predict([g[0] for g in got], paths[at:at + self.batch],
                                             [g[1] for g in got])
                for k, v in rec.items():
                    recs.setdefault(k, []).extend(v)
            w0 = time.perf_counter()
            if self.fmt == "parquet":
                import pyarrow.parquet as pq
                table = _records_table(recs)
                self.out.write(part_name(int(part), "parquet"), lambda f: pq.write_table(table, f))
            else:
                data = _jsonl(recs)
                self.out.write(part_name(int(part), "jsonl"), lambda f: f.write(data))
            out["part"].append(int(part))
            out["images"].append(len(paths))
            out["failed"].append(sum(1 for e in recs["error"] if e))
            out["write_s"].append(time.perf_counter() - w0)
            out["read_wait_s"].append(wait)
            out["busy_s"].append(time.perf_counter() - t0)
            out["rss_bytes"].append(_rss_bytes())
            out["actor"].append(os.getpid())
            out["actor_born"].append(self.born)
            out["actor_init_s"].append(self.init_s)
            out["actor_ready"].append(self.ready)
            out["start"].append(time.time() - (time.perf_counter() - t0))
        return {k: np.asarray(v) for k, v in out.items()}


# ---- the job -----------------------------------------------------------------------------------


def _steady_rate(stats: List[Dict[str, Any]]) -> Optional[float]:
    """Images per second after every actor's first part: the parts that started once the last
    actor finished its first, over the time from then to the last commit."""
    spans = [(float(s["start"]), float(s["start"]) + float(s["busy_s"]), int(s["images"]),
              int(s["actor"])) for s in stats]
    if not spans:
        return None
    firsts = {}
    for st, end, _, actor in sorted(spans):
        firsts.setdefault(actor, end)
    t = max(firsts.values())
    later = [(end, n) for st, end, n, _ in spans if st >= t - 1e-3]
    if not later or max(e for e, _ in later) <= t:
        return None
    return sum(n for _, n in later) / (max(e for e, _ in later) - t)


def run_job(model: str, images: str, out: str, *, recipe: str = "", labels: Optional[str] = None,
            top_k: int = 5, batch: int = 32, actors: Optional[int] = None,
            cpus_per_actor: int = 1, part_size: Optional[int] = None, fmt: str = "parquet",
            address: Optional[str] = None, attempts: int = 3, overwrite: bool = False,
            device: str = "cpu", precision: str = "fp32", log=print) -> Dict[str, Any]:
    """Runs the whole job (see the module's text); returns its summary. Raises kiln errors for
    bad settings before any image is read (the model and recipe are checked here first)."""
    import ray
    if fmt not in ("parquet", "jsonl"):
        raise kiln.InvalidArgument(f"format must be parquet or jsonl; got '{fmt}'")
    if batch < 1 or (part_size or 1) < 1 or cpus_per_actor < 1 or attempts < 1:
        raise kiln.InvalidArgument("batch, part size, CPUs per actor and attempts must be >= 1")
    model = os.path.abspath(model) if "://" not in model else model
    predictor = {"model": model, "recipe": recipe, "top_k": top_k, "device": device,
                 "precision": precision,
                 "labels": os.path.abspath(labels) if labels else None}
    probe = Predictor(**dict(predictor, threads=1))  # fails here on a bad model/recipe/labels
    if probe.labels is not None and probe.classifier:
        classes = probe.session.outputs[0].shape[1]
        if isinstance(classes, int) and classes != len(probe.labels):
            raise kiln.InvalidArgument(f"labels file '{labels}' has {len(probe.labels)} names but "
                                       f"the model has {classes} classes")
    settings = {"model": model, "recipe": probe.decoder.recipe, "top_k": top_k,
                "labels": predictor["labels"], "format": fmt, "images": images}
    del probe
    t_list = time.perf_counter()
    files = list_images(images)
    list_s = time.perf_counter() - t_list
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    if actors is None:
        actors = max(int(ray.cluster_resources().get("CPU", 1)) // cpus_per_actor, 1)
    if part_size is None:  # about 8 parts per actor, so the last round leaves few actors idle
        part_size = min(max(-(-len(files) // (8 * actors)), 16), 1024)
    dest = _Out(out)
    parts = _plan(dest, files, settings, part_size, overwrite)
    total = sum(len(p) for p in parts)
    done_before = dest.committed_parts(fmt)
    skipped = sum(len(parts[i]) for i in done_before if i < len(parts))
    log(f"kiln.ray: {len(files)} images listed, {len(parts)} parts of <= {len(parts[0])}; "
        f"{len(done_before)} parts ({skipped} images) committed earlier")
    t0 = time.perf_counter()
    t0_wall = time.time()
    stats: List[Dict[str, Any]] = []
    first_s = None  # to the first part committed: actors started, model loaded, plan prepared
    for attempt in range(1, attempts + 1):
        committed = dest.committed_parts(fmt)
        todo = [i for i in range(len(parts)) if i not in committed]
        if not todo:
            break
        if attempt > 1:
            log(f"kiln.ray: attempt {attempt}: {len(todo)} parts left undone by the last one")
        ds = ray.data.from_items([{"part": i, "paths": parts[i]} for i in todo],
                                 override_num_blocks=len(todo))
        ds = ds.map_batches(PartWriter, fn_constructor_kwargs={
            "predictor": dict(predictor, threads=cpus_per_actor), "out": out, "fmt": fmt,
            "batch": batch}, batch_size=1, num_cpus=cpus_per_actor,
            compute=ray.data.ActorPoolStrategy(size=min(actors, len(todo))))
        try:
            for row in ds.iter_rows():
                if first_s is None:
                    first_s = time.perf_counter() - t0
                stats.append(dict(row))
        except Exception as e:  # a lost node or actor past Ray's retries: the parts left undone
            log(f"kiln.ray: attempt {attempt} ended early: {type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else ''}")
    wall = time.perf_counter() - t0
    committed = dest.committed_parts(fmt)
    missing = [i for i in range(len(parts)) if i not in committed]
    done_now = sum(len(parts[i]) for i in committed - done_before if i < len(parts))
    failed = sum(int(s["failed"]) for s in stats)
    busy = sum(float(s["busy_s"]) for s in stats)
    summary = {
        "images": total, "done": done_now, "skipped": skipped, "failed_images": failed,
        "parts": len(parts), "parts_missing": len(missing), "actors": actors,
        "cpus_per_actor": cpus_per_actor, "wall_s": wall, "list_s": list_s,
        "first_part_s": first_s,
        # Per actor: (pid, process started, constructor done), seconds after the job's start.
        "actor_start_s": sorted({(int(s["actor"]), round(float(s["actor_born"]) - t0_wall, 3),
                                  round(float(s["actor_ready"]) - t0_wall, 3)) for s in stats}),
        "first_part_start_s": min((float(s["start"]) - t0_wall for s in stats), default=None),
        "images_per_s": done_now / wall if wall > 0 else 0.0,
        "actor_busy_s": busy, "read_wait_s": sum(float(s["read_wait_s"]) for s in stats),
        "write_s": sum(float(s["write_s"]) for s in stats),
        "steady_images_per_s": _steady_rate(stats),
        "rss_bytes": [int(s["rss_bytes"]) for s in stats],
        "actor_pids": [int(s["actor"]) for s in stats], "out": out, "format": fmt}
    log(f"kiln.ray: {done_now} images in {wall:.1f} s ({summary['images_per_s']:.1f} images/s), "
        f"{failed} failed, {skipped} skipped (committed earlier); {actors} actors x "
        f"{cpus_per_actor} CPU; actors busy {busy:.1f} s, waiting for reads "
        f"{summary['read_wait_s']:.1f} s, writing {summary['write_s']:.1f} s")
    if missing:
        log(f"kiln.ray: {len(missing)} parts are not committed after {attempts} attempts; run "
            f"the same command again to finish them")
    return summary


def read_records(out: str) -> Any:
    """The committed records of a job's output folder as one pyarrow Table (Parquet parts) or a
    list of dicts (JSON Lines parts), in part order."""
    dest = _Out(out)
    names = sorted(dest.committed())
    if names and names[0].endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq
        return pa.concat_tables([pq.read_table(dest.fs.open_input_file(dest.path(n)))
                                 for n in names if n.endswith(".parquet")])
    return [json.loads(line) for n in names if n.endswith(".jsonl")
            for line in dest.read(n).decode().splitlines()]
