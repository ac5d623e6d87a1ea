#!/usr/bin/env python3
"""One benchmark run of an anchor runtime (ONNX Runtime or OpenVINO, CPU), as `kiln bench` runs kiln.

usage: bench/.venv/bin/python bench/anchor_bench.py MODEL.onnx --runtime ort|ov-f32|ov-default
           [--batch 1] [--threads 2] [--warmup W] [--iterations I] [--save-output FILE.npy]

Prints one JSON line with the keys of `kiln bench --json` (tools/kiln/bench.cc): runtime, version,
model, batch, threads, warmup, iterations, load_ms, first_run_ms, latency_ms {min, p50, p90, p99,
max, mean, std}, throughput_per_s, precision, rss_mb (peak RSS from getrusage ru_maxrss, so it
counts the Python interpreter and numpy too; also written as peak_rss_mb), cpu_model, inputs,
times_ms, plus the settings each runtime reports back.

Runtimes (the same thread count N for all):
  ort         ONNX Runtime, CPU execution provider: intra_op_num_threads=N, inter_op_num_threads=1,
              sequential execution, all graph optimizations; the model as exported (dynamic batch).
  ov-f32      OpenVINO CPU plugin: INFERENCE_NUM_THREADS=N, PERFORMANCE_HINT=LATENCY,
              NUM_STREAMS=1, INFERENCE_PRECISION_HINT=f32; the model reshaped to the run's static
              shape first (kiln also plans for one concrete shape). CPU pinning is left at the
              plugin's default and reported (cpu_pinning).
  ov-default  the same without INFERENCE_PRECISION_HINT: the plugin picks its precision (bf16 where
              the CPU has AMX or AVX512-BF16); "precision" reports the one it used.

Inputs: every input generated like kiln bench and ort_bench.js do: the 32-bit LCG
s = s * 1103515245 + 12345 (mod 2^32) from seed 12345, restarted per input; float32 values
s / 2^31 - 1, integer inputs (s >> 16) % 4, bool ((s >> 16) & 1). The shape is the model input's
with a symbolic first dim set to --batch, or the full shape given with --shape NAME=AxBxC. Timing: wall clock (perf_counter) of one run call with
the inputs already in memory; percentiles by nearest rank at round(p / 100 * (n - 1)) and the
population standard deviation, the estimators of kiln bench. Exit status: 0, 1 on a failed run,
2 on bad options.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np

INPUT_SEED = 12345
LCG_A = 1103515245
LCG_C = 12345
RUNTIMES = ("ort", "ov-f32", "ov-default")


def lcg_words(n, seed=INPUT_SEED):
    """The first n states of the LCG after seed, as uint32, without a Python loop per value."""
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    out[0] = (seed * LCG_A + LCG_C) & 0xFFFFFFFF
    # (a, c) maps state s to the state `filled` steps later: a * s + c (mod 2^32); numpy's
    # uint32 products wrap, which is the modulus. Each pass doubles the filled prefix.
    a, c, filled = LCG_A, LCG_C, 1
    while filled < n:
        take = min(filled, n - filled)
        out[filled:filled + take] = out[:take] * np.uint32(a) + np.uint32(c)
        a, c = (a * a) & 0xFFFFFFFF, (a * c + c) & 0xFFFFFFFF
        filled += take
    return out


def seeded_input(dtype, shape):
    """kiln bench's generated input for one tensor of the given numpy dtype and shape."""
    words = lcg_words(int(np.prod(shape, dtype=np.int64)))
    if dtype == np.float32:
        values = (words.astype(np.float64) / 2147483648.0 - 1.0).astype(np.float32)
    elif dtype == np.bool_:
        values = ((words >> 16) & 1).astype(np.bool_)
    elif dtype in (np.int64, np.int32, np.int8, np.uint8):
        values = ((words >> 16) % 4).astype(dtype)
    else:
        raise ValueError(f"generated inputs are float32, int64, int32, int8, uint8 or bool; "
                         f"got {np.dtype(dtype).name}")
    return values.reshape(shape)


SHAPES = {}  # --shape NAME=AxBxC: full shapes given on the command line


def concrete_shape(name, dims, batch):
    """The model's declared dims with a symbolic first dim set to batch (None or str: symbolic),
    or the full shape given with --shape (as kiln bench --shape)."""
    if name in SHAPES:
        return SHAPES[name]
    shape = []
    for i, d in enumerate(dims):
        if isinstance(d, int) and d >= 0:
            if i == 0 and d != batch:
                raise ValueError(f"input '{name}' has a fixed first dim of {d}, --batch is {batch}")
            shape.append(d)
        elif i == 0:
            shape.append(batch)
        else:
            raise ValueError(f"input '{name}' {dims}: dim {i} is symbolic; give the full shape "
                             f"with --shape {name}=AxBxC")
    return shape


def stats(times):
    """kiln bench's estimators: nearest rank at round-half-away(p/100*(n-1)), population std."""
    t = sorted(times)
    n = len(t)

    def q(p):
        return t[min(n - 1, int(math.floor(p / 100.0 * (n - 1) + 0.5)))]

    mean = sum(t) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in t) / n)
    return {"min": t[0], "p50": q(50), "p90": q(90), "p99": q(99), "max": t[-1], "mean": mean,
            "std": std}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


ORT_TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32,
             "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_}


class OrtRunner:
    def __init__(self, model, threads):
        import onnxruntime as ort
        self.version = ort.__version__
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.settings = {"precision": "fp32", "intra_op_num_threads": threads,
                         "inter_op_num_threads": 1, "execution_mode": "sequential",
                         "providers": self.sess.get_providers()}

    def input_specs(self, batch):
        specs = []
        for i in self.sess.get_inputs():
            if i.type not in ORT_TYPES:
                raise ValueError(f"input '{i.name}' is {i.type}; generated inputs are "
                                 f"{', '.join(ORT_TYPES)}")
            specs.append((i.name, ORT_TYPES[i.type], concrete_shape(i.name, i.shape, batch)))
        return specs

    def bind(self, feeds):
        self.feeds = feeds

    def run(self):
        return self.sess.run(None, self.feeds)[0]


class OvRunner:
    def __init__(self, model, threads, precision_hint):
        import openvino as ov
        self.ov = ov
        self.version = ov.get_version()
        self.core = ov.Core()
        self.model = self.core.read_model(model)
        self.threads = threads
        self.precision_hint = precision_hint

    def input_specs(self, batch):
        specs = []
        for port in self.model.inputs:
            name = port.get_any_name()
            dims = [d.get_length() if d.is_static else None for d in port.get_partial_shape()]
            dtype = np.dtype(port.get_element_type().to_dtype()).type
            specs.append((name, dtype, concrete_shape(name, dims, batch)))
        return specs

    def bind(self, feeds):
        # Static shapes before compiling: the plugin plans for them as kiln does for its one shape.
        self.model.reshape({name: list(x.shape) for name, x in feeds.items()})
        config = {"INFERENCE_NUM_THREADS": self.threads, "PERFORMANCE_HINT": "LATENCY",
                  "NUM_STREAMS": 1}
        if self.precision_hint:
            config["INFERENCE_PRECISION_HINT"] = self.precision_hint
        self.compiled = self.core.compile_model(self.model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        for name, x in feeds.items():
            self.request.set_tensor(name, self.ov.Tensor(x, shared_memory=True))
        used = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        self.settings = {
            "precision": used.get_type_name() if hasattr(used, "get_type_name") else str(used),
            "precision_hint": self.precision_hint or "default",
            "inference_num_threads": self.compiled.get_property("INFERENCE_NUM_THREADS"),
            "performance_hint": str(self.compiled.get_property("PERFORMANCE_HINT")),
            "num_streams": int(self.compiled.get_property("NUM_STREAMS")),
            "cpu_pinning": bool(self.compiled.get_property("ENABLE_CPU_PINNING")),
            "optimization_capabilities": self.core.get_property("CPU",
                                                                "OPTIMIZATION_CAPABILITIES")}

    def run(self):
        self.request.infer()
        return self.request.get_output_tensor(0).data


def parse_args(argv):
    p = argparse.ArgumentParser(description="One ONNX Runtime or OpenVINO benchmark run.",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("Runtimes")[1])
    p.add_argument("model", help="ONNX model file")
    p.add_argument("--runtime", required=True, choices=RUNTIMES)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, help="untimed runs after the first (default 20 at batch "
                   "1, else 3: kiln bench's defaults)")
    p.add_argument("--iterations", type=int, help="timed runs (default 100 at batch 1, else 10)")
    p.add_argument("--save-output", help="write the first output of the first run (.npy)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="use this tensor instead of generated values (repeatable), as kiln bench "
                   "--input")
    p.add_argument("--shape", action="append", default=[],
                   help="NAME=AxBxC: full shape of a generated input (repeatable), as kiln bench "
                   "--shape; needed for symbolic dims other than the first")
    a = p.parse_args(argv)
    for spec in a.shape:
        name, _, dims = spec.partition("=")
        try:
            SHAPES[name] = [int(d) for d in dims.split("x")]
        except ValueError:
            p.error(f"--shape {spec}: expected NAME=AxBxC")
        if not name or min(SHAPES[name]) < 0:
            p.error(f"--shape {spec}: expected NAME=AxBxC")
    if a.warmup is None:
        a.warmup = 20 if a.batch == 1 else 3
    if a.iterations is None:
        a.iterations = 100 if a.batch == 1 else 10
    if a.batch < 1 or a.threads < 1 or a.iterations < 1 or a.warmup < 0:
        p.error("--batch, --threads and --iterations must be >= 1, --warmup >= 0")
    return a


def main(argv=None):
    a = parse_args(argv)
    ms = lambda t0: (time.perf_counter() - t0) * 1000.0  # noqa: E731
    try:
        t0 = time.perf_counter()
        if a.runtime == "ort":
            runner = OrtRunner(a.model, a.threads)
        else:
            runner = OvRunner(a.model, a.threads, "f32" if a.runtime == "ov-f32" else None)
        specs = runner.input_specs(a.batch)
        given = {}
        for spec in a.input:
            name, _, path = spec.partition("=")
            given[name] = np.load(path)
        feeds = {name: given[name] if name in given else seeded_input(dtype, shape)
                 for name, dtype, shape in specs}
        runner.bind(feeds)  # OpenVINO compiles here: part of the load, as kiln's Load + options
        load_ms = ms(t0)
        t0 = time.perf_counter()
        out = runner.run()
        first_run_ms = ms(t0)
        if a.save_output:
            np.save(a.save_output, np.asarray(out))
        for _ in range(a.warmup):
            runner.run()
        times = []
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            runner.run()
            times.append(ms(t0))
    except Exception as e:  # the runtimes raise their own types; report any as a failed run
        print(f"anchor_bench: {a.runtime} failed on {a.model}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    st = stats(times)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
    batch = specs[0][2][0] if specs and specs[0][2] else a.batch
    result = {
        "runtime": a.runtime, "version": runner.version, "model": a.model, "batch": batch,
        "threads": a.threads, "threads_requested": a.threads, "warmup": a.warmup,
        "iterations": a.iterations, "load_ms": load_ms, "first_run_ms": first_run_ms,
        "latency_ms": st, "throughput_per_s": batch * 1000.0 / st["mean"] if st["mean"] else 0.0,
        **runner.settings,
        "cpu_model": cpu_model(), "rss_mb": rss_mb, "peak_rss_mb": rss_mb,
        "inputs": [{"name": n, "dtype": np.dtype(d).name, "shape": s, "source": "random"}
                   for n, d, s in specs],
        "times_ms": times}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
