"""kiln: an offline inference engine for ONNX vision models, from Python.

    import kiln, numpy as np
    session = kiln.Session("model.onnx")               # device="cuda" for the CUDA backend
    outputs = session.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

`kiln.Session` runs a model; `kiln.Batcher` merges concurrent requests into batches; `kiln.quantize`
writes an int8 QDQ model from calibration data; `kiln.ImageJob` classifies a folder of images;
`kiln.ImageDecoder` decodes and preprocesses image bytes with the same C++ decoders and recipes;
`kiln.ray` is the model stage for Ray Data (docs/ray.md);
`kiln.doctor()` describes the machine. `kiln.ort` is a drop-in for the `onnxruntime` module.
Errors are exceptions of kiln.Error's subclasses (InvalidArgument, InvalidModel, Unsupported, ...)
with kiln's message. docs/python.md has the whole guide.
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Union

from . import _kiln
from ._kiln import (Cancelled, DeadlineExceeded, DeviceError, Error, Internal,  # noqa: F401
                    InvalidArgument, InvalidModel, NotFound, OutOfMemory, Unavailable,
                    Unsupported)

__version__ = _kiln.__version__
__all__ = ["Session", "TensorInfo", "ModelMetadata", "Batcher", "ImageJob", "ImageDecoder", "top_k", "quantize", "doctor",
           "Error", "InvalidArgument", "InvalidModel", "Unsupported", "NotFound", "OutOfMemory",
           "DeviceError", "Unavailable", "DeadlineExceeded", "Cancelled", "Internal",
           "__version__"]

ModelSource = Union[str, bytes, bytearray, memoryview, "os.PathLike[str]"]


class TensorInfo(NamedTuple):
    """A model input or output as declared. dtype is a numpy dtype (None when numpy has none,
    such as bfloat16); shape lists each dim as an int, the symbol's name (str) or None when
    unknown; shape itself is None when the model declares no shape."""
    name: str
    dtype: Any
    shape: Optional[List[Union[int, str, None]]]


class ModelMetadata(NamedTuple):
    """The model file's description of itself (ModelProto's fields)."""
    producer_name: str
    producer_version: str
    domain: str
    model_version: int
    doc_string: str
    graph_name: str
    graph_doc_string: str
    ir_version: int
    opset_imports: List[tuple]
    custom: Dict[str, str]


def _parse_device(device: str):
    """("cuda", 1) for "cuda:1"; ("cpu", 0) for "cpu"."""
    if not isinstance(device, str):
        raise InvalidArgument(f"device must be a str such as 'cpu' or 'cuda:0'; got {device!r}")
    name, _, index = device.partition(":")
    if index and not index.isdigit():
        raise InvalidArgument(f"device '{device}': the index after ':' must be a number")
    return name, int(index) if index else 0


def _as_array(value, dtype, what):
    """A C-contiguous array of value (np.asarray(order="C"): np.ascontiguousarray would make a 0-d
    one 1-d): what numpy, or the value's own __array__, raises on the way (an int too big for the
    dtype, a ragged list) as InvalidArgument naming `what`."""
    import numpy as np
    try:
        return np.asarray(value, dtype=dtype, order="C")
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001: any class numpy or the object raises
        raise InvalidArgument(f"{what}: numpy cannot make a {np.dtype(dtype).name} array of the "
                              f"{type(value).__name__} given ({type(e).__name__}: {e})") from e


def _infos(specs):
    import numpy as np
    return [TensorInfo(s["name"], np.dtype(s["dtype"]) if s["dtype"] else None, s["shape"])
            for s in specs]


class Session(_kiln._Session):
    """A loaded, checked ONNX model ready to run.

    Session(model, device="cpu", precision="fp32", threads=None, *, optimize=True,
            disabled_passes=(), reference_only=False, tune=False, plan_cache_dir=None,
            max_plans=64, cuda_graph=False, pinned_staging=True, share_weights=True)

    model: a path or the serialized bytes. device: "cpu", "cuda" or "cuda:N" (the CUDA plugin is
    opened only then; without a driver or its libraries: kiln.Unavailable naming what was looked
    for). precision: "fp32", "bf16" (CPUs with AVX512-BF16/AMX) or "fp16" (CUDA). threads: compute
    threads per run (None: OMP_NUM_THREADS, else the physical cores capped by the affinity mask and
    cgroup CPU quota). share_weights: sessions of the same model file (and graph-changing
    options) in this process hold one copy of its weights, freed with the last of them;
    stats()["weights_shared"] says whether this one found them loaded. The rest are
    SessionOptions' fields (docs/embedding.md). The model loads with the GIL released.

    run(feeds, outputs=None) -> {name: numpy.ndarray}, and session(feeds): feeds maps every input
    name to an array. A C-contiguous CPU array of the input's dtype (numpy, or any __dlpack__
    object such as a torch CPU tensor) is read in place; anything else is converted once (same-
    kind casts only), which stats()["inputs_copied"] counts. The returned arrays own the memory
    kiln wrote (no copy). run_into(feeds, outputs) writes into preallocated arrays. Several
    threads may call run at once (the GIL is released while it runs).
    """

    def __init__(self, model: ModelSource, device: str = "cpu", precision: str = "fp32",
                 threads: Optional[int] = None, *, optimize: bool = True,
                 disabled_passes: Sequence[str] = (), reference_only: bool = False,
                 tune: bool = False, plan_cache_dir: Optional[str] = None, max_plans: int = 64,
                 cuda_graph: bool = False, pinned_staging: bool = True,
                 share_weights: bool = True):
        backend, index = _parse_device(device)
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise InvalidArgument(f"threads must be a positive int or None; got {threads!r}")
        super().__init__(model, backend, index, precision, threads or 0, optimize,
                         list(disabled_passes), reference_only, tune, plan_cache_dir or "",
                         max_plans, cuda_graph, pinned_staging, share_weights)
        self._device = device
        self._inputs = self._outputs = self._meta = None

    @property
    def device(self) -> str:
        return self._device

    @property
    def inputs(self) -> List[TensorInfo]:
        if self._inputs is None:
            self._inputs = _infos(self._input_specs())
        return self._inputs

    @property
    def outputs(self) -> List[TensorInfo]:
        if self._outputs is None:
            self._outputs = _infos(self._output_specs())
        return self._outputs

    @property
    def model_metadata(self) -> ModelMetadata:
        if self._meta is None:
            self._meta = ModelMetadata(**self._metadata())
        return self._meta

    @property
    def metadata(self) -> Dict[str, str]:
        """The model's metadata_props (e.g. a classifier's label map)."""
        return dict(self.model_metadata.custom)

    def trace(self, feeds: Dict[str, Any], path: Union[str, "os.PathLike[str]"],
              runs: int = 10) -> List[float]:
        """Runs `runs` times with every step timed and writes them to `path` as Chrome/Perfetto
        trace JSON (open in ui.perfetto.dev or chrome://tracing: one slice per kernel with its
        node, op, kernel and output shapes). Returns each run's wall time in ms. CPU only."""
        return self._trace(feeds, os.fspath(path), int(runs))

    async def run_async(self, feeds: Dict[str, Any], outputs: Optional[List[str]] = None):
        """run() on the event loop's default executor: awaits without blocking the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.run, feeds, outputs)

    def bench(self, feeds: Optional[Dict[str, Any]] = None, *, iterations: int = 100,
              warmup: int = 10) -> Dict[str, float]:
        """Times run() from Python: `warmup` runs, then `iterations` timed ones (zeros of the
        declared shapes when feeds is None; symbolic dims as 1). Returns latency percentiles and
        the mean in ms, and items/s (the first input's first dim over the mean, as `kiln bench`
        reports throughput)."""
        import numpy as np
        for what, n, least in (("iterations", iterations, 1), ("warmup", warmup, 0)):
            if not isinstance(n, int) or n < least:
                raise InvalidArgument(f"{what} must be an int >= {least}; got {n!r}")
        if feeds is None:
            feeds = {}
            for i in self.inputs:
                if i.shape is None or i.dtype is None:
                    raise InvalidArgument(f"input '{i.name}' has no declared shape or dtype: "
                                          "pass feeds")
                feeds[i.name] = np.zeros([d if isinstance(d, int) else 1 for d in i.shape],
                                         i.dtype)
        for _ in range(warmup):
            self.run(feeds)
        times = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            self.run(feeds)
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        first = next(iter(feeds.values()))
        batch = int(np.shape(first)[0]) if np.ndim(first) else 1

        def pct(p):
            return times[min(len(times) - 1, int(p / 100 * len(times)))]
        mean = sum(times) / len(times)
        # items/s from the mean, as `kiln bench` computes its throughput
        return {"p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99), "mean_ms": mean,
                "items_per_s": batch * 1e3 / mean, "iterations": iterations, "batch": batch}

    def __repr__(self):
        ins = ", ".join(f"{i.name}: {i.dtype}{i.shape}" for i in self.inputs)
        return f"kiln.Session(device='{self._device}', inputs=[{ins}])"


class Batcher:
    """In-process dynamic batching (Triton's semantics) over one session.

    Batcher(session, max_batch=32, max_queue_delay_us=500, preferred_sizes=(), max_queue=1024,
            merge=True)

    infer(feeds) blocks (GIL released) until the request's batch ran; submit(feeds) returns a
    concurrent.futures.Future; `await infer_async(feeds)` is the asyncio form. Requests of one
    sample each from many threads or coroutines are merged into batches along the first
    dimension (the model's batch dim must be symbolic). A full queue raises kiln.Unavailable.
    """

    def __init__(self, session: Session, max_batch: int = 32, max_queue_delay_us: int = 500,
                 preferred_sizes: Sequence[int] = (), max_queue: int = 1024, merge: bool = True):
        self._b = _kiln._Batcher(session, max_batch, max_queue_delay_us, list(preferred_sizes),
                                 max_queue, merge)

    def infer(self, feeds: Dict[str, Any]) -> Dict[str, Any]:
        return self._b.infer(feeds)

    def submit(self, feeds: Dict[str, Any]):
        import concurrent.futures
        fut = concurrent.futures.Future()
        fut.set_running_or_notify_cancel()
        self._b.submit(feeds, fut)
        return fut

    async def infer_async(self, feeds: Dict[str, Any]) -> Dict[str, Any]:
        return await asyncio.wrap_future(self.submit(feeds))

    def stats(self) -> Dict[str, Any]:
        return self._b.stats()

    def close(self) -> None:
        """Stops accepting, runs what is queued, then returns."""
        self._b.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ImageJob:
    """Classifies (or runs) every image of a folder or list file into a records file, as
    `kiln run --images` does: decode pipeline, batches, resume, shards.

    ImageJob(session, images, out, recipe="", labels="", batch=32, workers=0, top_k=5,
             resume=False, shard="", shards=0).run(progress=None) -> summary dict
    progress(done, total, failed, elapsed_s) is called after every batch.
    """

    def __init__(self, session: Session, images: str, out: str, recipe: str = "",
                 labels: str = "", batch: int = 32, workers: int = 0, top_k: int = 5,
                 resume: bool = False, shard: str = "", shards: int = 0):
        self._args = (session, os.fspath(images), os.fspath(out), recipe, os.fspath(labels),
                      batch, workers, top_k, resume, shard, shards)

    def run(self, progress=None) -> Dict[str, Any]:
        return _kiln._image_job(*self._args, progress=progress)


class ImageDecoder:
    """Decodes and preprocesses images for one model input with the C++ decoders (libjpeg-turbo,
    libpng) and recipes of `kiln run --images`, a batch at a time, with the GIL released.

    ImageDecoder(recipe="", input=None, threads=1, *, session=None)
    recipe: a preset ("torchvision-imagenet", "paddleocr", "scale01", "fashion-mnist") or a recipe
    .json file; "" picks torchvision-imagenet for a fixed-size RGB input. The input is
    `session`'s first input, or `input`, a shape [N, C, H, W] (N may be None). threads: decode
    threads per call (each image is decoded by one).

    decode(images) -> (batch, errors): images are bytes-like objects (bytes, bytearray,
    memoryview, uint8 numpy arrays) of JPEG or PNG files; batch is float32 [n, *sample_shape]
    and errors[i] is "" or why image i failed (its slice of batch is zeros). No image's failure
    raises. transform(arrays) does the same for images decoded elsewhere (uint8 [H, W] or
    [H, W, 3] RGB arrays, as Ray Data's read_images gives).
    """

    def __init__(self, recipe: str = "", input: Optional[Sequence[Optional[int]]] = None,
                 threads: int = 1, *, session: Optional[Session] = None):
        if session is not None:
            input = session.inputs[0].shape
        if input is None:
            raise InvalidArgument("ImageDecoder needs input=[N, C, H, W] or session=")
        dims = [-1 if (d is None or isinstance(d, str)) else int(d) for d in input]
        self._d = _kiln._ImageDecoder(os.fspath(recipe), dims, max(int(threads), 1))

    @property
    def recipe(self) -> str:
        return self._d.recipe

    @property
    def recipe_json(self) -> str:
        return self._d.recipe_json

    @property
    def threads(self) -> int:
        return self._d.threads

    @property
    def sample_shape(self) -> List[int]:
        return list(self._d.sample_shape)

    def decode(self, images: Sequence[Any]):
        return self._d.decode(list(images))

    def transform(self, arrays: Sequence[Any]):
        return self._d.transform([_as_array(a, "uint8", f"image {i}")
                                  for i, a in enumerate(arrays)])


def top_k(scores: Any, k: int = 5):
    """The classification of `kiln run --images` records for a float32 [n, classes] array of
    scores: softmax unless a row already is a distribution, then the k best classes, ties to the
    lower index. Returns (indices int64 [n, k], probabilities float32 [n, k])."""
    return _kiln._top_k(_as_array(scores, "float32", "scores"), int(k))


def _quantize_path(value, what):
    """A str path of a str or os.PathLike (bytes paths as os.fsdecode decodes them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fsdecode(os.fspath(value))
    raise TypeError(f"{what} must be a str or os.PathLike path; got {type(value).__name__}")


def _calibration_forms(calibration):
    """(paths, arrays) of quantize's calibration: the `--calibrate` forms or {name: array}."""
    if isinstance(calibration, Mapping):
        return [], list(calibration.items())
    if isinstance(calibration, (str, os.PathLike)):
        return [_quantize_path(calibration, "calibration")], []
    if isinstance(calibration, (list, tuple)) and all(isinstance(c, (str, os.PathLike))
                                                      for c in calibration):
        return [_quantize_path(c, "calibration") for c in calibration], []
    got = type(calibration).__name__
    if isinstance(calibration, (list, tuple)):
        got += " of " + ", ".join(sorted({type(c).__name__ for c in calibration}))
    raise InvalidArgument("calibration must be a dict of input name to an array of samples, a "
                          "path (a tensor file, an image folder or list) or a list of NAME=FILE "
                          f"strings; got {got}")


def _quantize_labels(labels):
    """(path, None) or ("", int64 array) of quantize's labels."""
    if labels is None:
        return "", None
    if isinstance(labels, (str, os.PathLike)):
        return _quantize_path(labels, "labels"), None
    import numpy as np
    try:
        a = np.asarray(labels)
    except MemoryError:
        raise
    except Exception as e:  # noqa: BLE001: any class numpy or the object raises
        raise InvalidArgument(f"labels: numpy cannot make an array of the {type(labels).__name__} "
                              f"given ({type(e).__name__}: {e})") from e
    if a.dtype.kind not in "iu":
        raise InvalidArgument(f"labels must be integer classes, one per sample; got {a.dtype}")
    return "", _as_array(a, "int64", "labels")


def quantize(model: str, out: str,
             calibration: Union[Mapping[str, Any], str, "os.PathLike[str]", Sequence[str]], *,
             method: str = "percentile", percentile: float = 99.99, batch: int = 32,
             keep_float: Sequence[str] = (), quantize_all: bool = False,
             bias_correction: bool = True, channel_activations: bool = False,
             threads: Optional[int] = None, samples: Optional[int] = None,
             recipe: Optional[str] = None, cache: Optional[str] = None,
             trt_cache: Optional[str] = None, max_drop: Optional[float] = None,
             labels: Any = None, eval_samples: int = 1000, compare: bool = False,
             progress: Optional[Callable[[str, str], None]] = None) -> Dict[str, Any]:
    """Writes an int8 QDQ model of `model` to `out`, as `kiln quantize` does (the same library
    pipeline, docs/quantization.md).

    calibration: {input name: array of samples along the first dim}, or what `--calibrate`
    takes: a path (a .npy/.pb tensor file with samples along dim 0, or images: a folder or a
    .txt/.lst list decoded through `recipe`) or a list of "NAME=FILE" (one tensor file per input
    of a model with several). samples: the first N calibrate (images: N spread out), the rest
    are held out for `compare` and `max_drop`; None: every row of the arrays, or 300 of files.
    batch: samples per calibration run (<= 0: all at once). cache / trt_cache: the calibration
    cache JSON (read when it matches, written when absent) and a TensorRT calibration table.
    compare: float32 against int8 per quantized node on `batch` held-out samples. max_drop:
    accuracy control, keeping the most sensitive nodes float until the held-out score drops at
    most this many points (top-1 against `labels`, a path or an array of one int class per row,
    else the argmax agreement with float32) on up to `eval_samples` held-out rows; one tensor
    input only. progress(kind, text): "batch" (a status line per calibration batch), "note" (a
    line), "report" (accuracy control's text, newlines included); what it raises stops the work
    and is raised.

    Returns the summary: method, samples, quantized_nodes, float_nodes ({node: why}),
    model_bytes, bias_corrected, seconds, cache_hit, failed_images, activations (dicts of tensor,
    dtype, scale, zero_point, min, max, threshold, method, channel_scales); with compare also
    "comparison" (held_out, layers: dicts of node, tensor, cosine, max_abs, max_ref, the last
    ones for "(model output)"); with max_drop "accuracy" (eval_samples, measure, float_score,
    int8_score, sensitivity [(node, drop)], kept_float, drop). Errors are kiln exceptions: an
    unreached max_drop is InvalidArgument "--max-drop ... not reached" (`out` then holds the
    last candidate)."""
    paths, arrays = _calibration_forms(calibration)
    label_path, label_array = _quantize_labels(labels)
    opt_path = lambda v, what: "" if v is None else _quantize_path(v, what)  # noqa: E731
    return _kiln._quantize(
        os.fspath(model), os.fspath(out), paths, arrays, method, percentile, batch,
        list(keep_float), quantize_all, bias_correction, channel_activations, threads or 0,
        samples, opt_path(recipe, "recipe"), opt_path(cache, "cache"),
        opt_path(trt_cache, "trt_cache"), max_drop, label_path, label_array, eval_samples,
        compare, progress)


def doctor() -> Dict[str, Any]:
    """`kiln doctor --json` as a dict: build, CPU (ISA, bf16, int8), CUDA driver and libraries."""
    return json.loads(_kiln._doctor_json())
