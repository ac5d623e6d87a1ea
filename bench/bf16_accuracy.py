#!/usr/bin/python3
"""Accuracy cost of --precision bf16 against fp32, per model, as kiln runs them.

usage: bench/bf16_accuracy.py [--kiln build/release/tools/kiln/kiln] [--models ...] [--n 256]
                              [--workdir bench/.work/bf16]

Models: the torchvision exports of tests/models/make_torchvision_refs.py with --calibrate-bn
(seeded random weights, BatchNorm statistics measured on random inputs, so outputs depend on the
input). Inputs: N images of seeded standard-normal noise (no real photographs ship with the
Debian packages we use for these models). For each model kiln runs the same batch at fp32 and at
bf16; reported: mean and minimum per-sample cosine similarity of the logits, max relative error
(|bf16 - fp32| / max|fp32| per sample, worst sample), and top-1 agreement.
"""
import argparse, json, os, subprocess, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

p = argparse.ArgumentParser()
p.add_argument("--kiln", default=os.path.join(ROOT, "build/release/tools/kiln/kiln"))
p.add_argument("--models", default="resnet18,resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny")
p.add_argument("--n", type=int, default=256)
p.add_argument("--workdir", default=os.path.join(HERE, ".work", "bf16"))
p.add_argument("--json", default=None)
a = p.parse_args()
os.makedirs(a.workdir, exist_ok=True)
models = a.models.split(",")
subprocess.run([sys.executable, os.path.join(ROOT, "tests/models/make_torchvision_refs.py"),
                a.workdir, "--models", a.models, "--opsets", "13", "--batches", "1",
                "--calibrate-bn"], check=True, stdout=subprocess.DEVNULL)
x_path = os.path.join(a.workdir, f"noise_{a.n}.npy")
if not os.path.exists(x_path):
    rng = np.random.default_rng(2026)
    np.save(x_path, rng.standard_normal((a.n, 3, 224, 224), dtype=np.float32))

rows = []
print(f"{'model':16s} {'cos mean':>9s} {'cos min':>9s} {'max rel err':>12s} {'top-1 agree':>12s}")
for m in models:
    outs = {}
    for prec in ("fp32", "bf16"):
        od = os.path.join(a.workdir, f"out_{m}_{prec}")
        r = subprocess.run([a.kiln, "run", os.path.join(a.workdir, f"{m}_op13.onnx"), "--input",
                            x_path, "--output-dir", od, "--precision", prec],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{m}: kiln failed at {prec}: {r.stderr.strip()}")
            break
        outs[prec] = np.load(os.path.join(od, "logits.npy")).astype(np.float64)
    if len(outs) != 2:
        continue
    f, b = outs["fp32"], outs["bf16"]
    cos = (f * b).sum(1) / (np.linalg.norm(f, axis=1) * np.linalg.norm(b, axis=1))
    rel = (np.abs(b - f).max(1) / np.abs(f).max(1)).max()
    agree = float((f.argmax(1) == b.argmax(1)).mean())
    rows.append({"model": m, "n": a.n, "cos_mean": float(cos.mean()), "cos_min": float(cos.min()),
                 "max_rel_err": float(rel), "top1_agreement": agree})
    print(f"{m:16s} {cos.mean():9.5f} {cos.min():9.5f} {rel:12.4g} {agree:12.3f}", flush=True)
if a.json:
    with open(a.json, "w") as fh:
        json.dump(rows, fh, indent=1)
