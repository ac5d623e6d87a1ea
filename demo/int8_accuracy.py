#!/usr/bin/python3
"""INT8 accuracy of a Fashion-MNIST model (the demo's CNN by default; demo/train_int8_nets.py makes
the ResNet- and MobileNetV2-style ones): kiln quantize with each calibration method, first/last
layers float (the default) and all layers int8 (--quantize-all), with kiln's default fast bias
correction and without it (--no-bias-correction), top-1 on the 10,000 test images run by kiln
(int8 kernels) against float32.

usage: /usr/bin/python3 demo/int8_accuracy.py [--model demo/fashion_mnist_cnn.onnx]
       [--methods minmax,percentile,entropy,mse] [--kiln build/release/tools/kiln/kiln]
       [--work DIR] [--float-adds] [--schemes 0,1,2,3] [--ort-python bench/.venv/bin/python]
       [--precision fp32|bf16]
Calibration: 300 training images (seeded choice, never the test set). With --ort-python, ONNX
Runtime also runs each QDQ model (its int8 kernels, and with graph optimizations off: the QDQ
graph's float arithmetic). --precision bf16 runs the int8 models' float parts (the first and
last layers the default scheme keeps float) in bfloat16, as OpenVINO does on CPUs with
AVX512-BF16 or AMX; the float32 baseline stays float32.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from fmnist_data import load_split, normalize  # noqa: E402

ORT_SNIPPET = """
import sys, numpy as np, onnxruntime as ort
x = np.load(sys.argv[2]); y = np.load(sys.argv[3])
for opt in (True, False):
    so = ort.SessionOptions()
    if not opt:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
    out = s.run(None, {s.get_inputs()[0].name: x})[0]
    print(f"{(out.argmax(1) == y).mean() * 100:.2f}", end=" ")
"""


def top1(kiln, model, images, labels, work, precision="fp32"):
    out = os.path.join(work, "out")
    subprocess.run([kiln, "run", model, "--input", images, "--output-dir", out,
                    "--precision", precision], check=True, capture_output=True)
    logits = np.load(os.path.join(out, "logits.npy"))
    return (logits.argmax(1) == np.load(labels)).mean() * 100


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kiln", default=os.path.join(REPO, "build/release/tools/kiln/kiln"))
    p.add_argument("--model", default=os.path.join(HERE, "fashion_mnist_cnn.onnx"))
    p.add_argument("--methods", default="minmax,percentile,entropy,mse")
    p.add_argument("--work")
    p.add_argument("--channel-activations", action="store_true",
                   help="pass --channel-activations to every kiln quantize (per-channel scales "
                        "on depthwise convolutions' inputs)")
    p.add_argument("--float-adds", action="store_true",
                   help="pass --float-adds to every kiln quantize (residual Adds float, as before "
                        "2026-11-28)")
    p.add_argument("--schemes", default="0,1,2",
                   help="which schemes to run: 0 first/last float, 1 all int8 (both with kiln's "
                        "default bias correction), 2 all int8 without it, 3 first/last float "
                        "without it (default 0,1,2)")
    p.add_argument("--ort-python")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="kiln_int8_")
    model = a.model
    xt, yt = load_split("t10k")
    images, labels = os.path.join(work, "images.npy"), os.path.join(work, "labels.npy")
    np.save(images, normalize(xt))
    np.save(labels, yt.astype(np.int64))
    xc, _ = load_split("train")
    idx = np.random.default_rng(0).choice(len(xc), 300, replace=False)
    calib = os.path.join(work, "calib.npy")
    np.save(calib, normalize(xc[idx]))
    base = top1(a.kiln, model, images, labels, work)
    print(f"{os.path.basename(model)}: float32 {base:.2f}%"
          + (f" (int8 models' float parts in {a.precision})" if a.precision != "fp32" else ""))
    header = "scheme, method: kiln int8 top-1 (drop)"
    if a.ort_python:
        header += " | ONNX Runtime int8 kernels, ORT QDQ float arithmetic"
    print(header)
    # Bias correction is on by default since 2026-11-29 (schemes 2 and 3 turn it off).
    schemes = (("first/last float", []), ("all int8", ["--quantize-all"]),
               ("all int8, no bias correction", ["--quantize-all", "--no-bias-correction"]),
               ("first/last float, no bias correction", ["--no-bias-correction"]))
    for i, (scheme, flags) in enumerate(schemes):
        if str(i) not in a.schemes.split(","):
            continue
        for method in a.methods.split(","):
            q = os.path.join(work, f"q_{method}_{i}.onnx")
            extra = ["--channel-activations"] if a.channel_activations else []
            extra += ["--float-adds"] if a.float_adds else []
            subprocess.run([a.kiln, "quantize", model, "--calibrate", calib, "--out", q,
                            "--method", method] + flags + extra, check=True, capture_output=True)
            acc = top1(a.kiln, q, images, labels, work, a.precision)
            line = f"{scheme}, {method}: {acc:.2f}% ({acc - base:+.2f} pt)"
            if a.ort_python:
                r = subprocess.run([a.ort_python, "-c", ORT_SNIPPET, q, images, labels],
                                   capture_output=True, text=True, check=True)
                ort_int8, ort_float = r.stdout.split()
                line += f" | {ort_int8}%, {ort_float}%"
            print(line, flush=True)


if __name__ == "__main__":
    main()
