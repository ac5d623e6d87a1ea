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

--torch adds a yardstick: the same PyTorch model (the one exported, BatchNorm calibrated the same
way) on the same inputs in fp32 and under torch.autocast("cpu", dtype=torch.bfloat16), the same
statistics; it says how much of the error is bf16 itself on these networks rather than kiln.
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
p.add_argument("--torch", action="store_true", help="also measure PyTorch's bf16 autocast")
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


def stats(f, b):
    cos = (f * b).sum(1) / (np.linalg.norm(f, axis=1) * np.linalg.norm(b, axis=1))
    rel = (np.abs(b - f).max(1) / np.abs(f).max(1)).max()
    return cos, rel, float((f.argmax(1) == b.argmax(1)).mean())


def torch_bf16(name, x):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests/models"))
    import make_torchvision_refs
    torch.set_num_threads(2)
    m = make_torchvision_refs.build_model(name, calibrate=True)
    with torch.no_grad():
        f = m(torch.from_numpy(x)).double().numpy()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b = m(torch.from_numpy(x)).float().double().numpy()
    return f, b

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
    cos, rel, agree = stats(f, b)
    row = {"model": m, "n": a.n, "cos_mean": float(cos.mean()), "cos_min": float(cos.min()),
           "max_rel_err": float(rel), "top1_agreement": agree}
    print(f"{m:16s} {cos.mean():9.5f} {cos.min():9.5f} {rel:12.4g} {agree:12.3f}", flush=True)
    if a.torch:
        try:
            tf, tb = torch_bf16(m, np.load(x_path))
        except RuntimeError as e:  # torch 1.13's autocast fails on ConvNeXt's LayerNorm2d
            print(f"{'  torch bf16':16s} failed: {str(e).splitlines()[0]}", flush=True)
            rows.append(row)
            continue
        tcos, trel, tagree = stats(tf, tb)
        row["torch_autocast_bf16"] = {"cos_mean": float(tcos.mean()), "cos_min": float(tcos.min()),
                                      "max_rel_err": float(trel), "top1_agreement": tagree}
        print(f"{'  torch bf16':16s} {tcos.mean():9.5f} {tcos.min():9.5f} {trel:12.4g} "
              f"{tagree:12.3f}", flush=True)
    rows.append(row)
if a.json:
    with open(a.json, "w") as fh:
        json.dump(rows, fh, indent=1)
