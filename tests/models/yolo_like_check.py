#!/usr/bin/python3
"""kiln against PyTorch on bench/yolo_like.py's YOLOv8n-like detector (C2f Split/Concat, SPPF
MaxPools, nearest Upsample, BN folded into SiLU convolutions): exported at 320x320, run at batch
2 with the optimizer and every fast kernel on, compared with PyTorch's output at rtol 1e-3 /
atol 1e-4 (the torchvision check's tolerances).

usage: tests/models/yolo_like_check.py KILN_BINARY WORKDIR    (prints "ok" and exits 0 on a match)
"""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import torch

kiln, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "yolo_like", os.path.join(here, "..", "..", "bench", "yolo_like.py"))
yl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(yl)

model_path = os.path.join(work, "yolo_like_320.onnx")
r = subprocess.run([sys.executable, spec.origin, model_path, "--size", "320"],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("export failed: " + r.stderr[-2000:])
# The same model in PyTorch: yolo_like.py's seeds and BatchNorm statistics.
torch.manual_seed(0)
m = yl.YoloLike().eval()
g = torch.Generator().manual_seed(1)
with torch.no_grad():
    for mod in m.modules():
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.weight.copy_(0.5 + torch.rand(mod.weight.shape, generator=g))
            mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
            mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
            mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=g))
x = torch.randn(2, 3, 320, 320, generator=torch.Generator().manual_seed(5))
with torch.no_grad():
    want = m(x).numpy()
np.save(os.path.join(work, "yolo_in.npy"), x.numpy())
out_dir = os.path.join(work, "yolo_out")
r = subprocess.run([kiln, "run", model_path, "--input",
                    "images=" + os.path.join(work, "yolo_in.npy"), "--output-dir", out_dir],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"kiln run failed ({r.returncode}): {r.stderr[-2000:]}")
got = np.load(os.path.join(out_dir, "preds.npy"))
if got.shape != want.shape:
    sys.exit(f"shape {got.shape} != {want.shape}")
bad = np.abs(got - want) > 1e-4 + 1e-3 * np.abs(want)
if bad.any():
    sys.exit(f"{int(bad.sum())} of {bad.size} values differ; max abs err "
             f"{float(np.abs(got - want).max()):.3g}")
print(f"ok: max abs err {float(np.abs(got - want).max()):.3g} over {got.size} values")
