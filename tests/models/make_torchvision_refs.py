#!/usr/bin/python3
"""Export torchvision models to ONNX and write PyTorch reference inputs/outputs for them.

usage: /usr/bin/python3 tests/models/make_torchvision_refs.py OUTDIR [--opsets 13,17]
           [--models resnet18,resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny]
           [--batches 1,4] [--force]

For each model, writes into OUTDIR:
  <model>_op<opset>.onnx      input "input" [N,3,224,224], output "logits" [N,1000], dynamic N
  <model>_b<B>_input.npy      float32 [B,3,224,224], seeded torch.randn
  <model>_b<B>_logits.npy     float32 [B,1000], PyTorch eval()/no_grad() output for that input
The logits do not depend on the opset, so they are computed once per model. Files that already
exist are kept (pass --force to redo them), so reruns are cheap.

Models are built exactly as /work/shared/bench/export_torchvision.py builds them: torch.manual_seed(0),
torchvision constructor with weights=None, eval(), then randomize() below (seeded random weights,
BatchNorm statistics and constant-initialised tensors). randomize() is a copy of that script's
function; keep the two in sync (a warning is printed if the shared script is found and differs).
Needs Debian's python3-torch, python3-torchvision, python3-onnx; run with /usr/bin/python3.
"""
import argparse
import ast
import os
import sys
import time

import numpy as np
import torch
import torchvision.models as tvm

ALL_MODELS = "resnet18,resnet50,mobilenet_v2,efficientnet_b0,convnext_tiny"
SHARED_SCRIPT = "/work/shared/bench/export_torchvision.py"
INPUT_SEED_BASE = 1234  # inputs for batch B use torch.Generator().manual_seed(INPUT_SEED_BASE + B)


def randomize(m):
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                mod.weight.copy_(0.5 + torch.rand(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
                mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=g))
        for _, t in list(m.named_parameters()) + list(m.named_buffers()):
            if t.dtype.is_floating_point and t.numel() > 1 and bool((t == t.flatten()[0]).all()):
                c = float(t.flatten()[0])
                t.copy_(0.02 * torch.randn(t.shape, generator=g) if c == 0.0
                        else c * (0.5 + torch.rand(t.shape, generator=g)))


def check_shared_randomize():
    """Warn if the shared export script's randomize() differs from the copy above."""
    if not os.path.exists(SHARED_SCRIPT):
        return
    try:
        with open(SHARED_SCRIPT) as f:
            theirs = [n for n in ast.parse(f.read()).body
                      if isinstance(n, ast.FunctionDef) and n.name == "randomize"]
        with open(os.path.abspath(__file__)) as f:
            ours = [n for n in ast.parse(f.read()).body
                    if isinstance(n, ast.FunctionDef) and n.name == "randomize"]
        if len(theirs) != 1 or ast.dump(theirs[0]) != ast.dump(ours[0]):
            print(f"WARNING: randomize() in {SHARED_SCRIPT} differs from this script's copy; "
                  "the models here may not match the benchmark exports", file=sys.stderr)
    except (OSError, SyntaxError) as e:
        print(f"WARNING: could not compare with {SHARED_SCRIPT}: {e}", file=sys.stderr)


def calibrate_bn(m, batches=4, batch_size=8):
    """Replaces the random BatchNorm running statistics with ones measured on random inputs.

    randomize() draws running means/variances unrelated to the activations, so activations grow
    layer after layer (resnet50's logits reach ~1300, and mobilenet_v2/efficientnet_b0 become almost
    input-independent). A trained network's statistics match its activations; measuring them here
    gives realistic scales, under which fp32 engines with different summation orders agree within
    rtol 1e-3 / atol 1e-4 and every model's output depends on its input. Weights, BN affine
    parameters and everything else stay as randomize() left them.
    """
    g = torch.Generator().manual_seed(7)
    bns = [mod for mod in m.modules() if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for mod in bns:
        mod.reset_running_stats()
        mod.momentum = None  # cumulative average over the calibration batches
    m.train()
    with torch.no_grad():
        for _ in range(batches):
            m(torch.randn(batch_size, 3, 224, 224, generator=g))
    m.eval()


def build_model(name, calibrate=False):
    """Same steps as export_torchvision.py (then calibrate_bn() when asked)."""
    torch.manual_seed(0)
    m = getattr(tvm, name)(weights=None).eval()
    randomize(m)
    if calibrate:
        calibrate_bn(m)
    return m


def export(m, path, opset):
    # Same dummy input and export arguments as export_torchvision.py (the dummy's values do not
    # matter for tracing; export_torchvision.py draws it after torch.manual_seed(0) + construction).
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(m, torch.randn(1, 3, 224, 224), tmp, opset_version=opset,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})
    os.replace(tmp, path)


def save_npy(path, arr):
    tmp = path + ".tmp.npy"
    np.save(tmp, arr)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("outdir")
    p.add_argument("--opsets", default="13,17")
    p.add_argument("--models", default=ALL_MODELS)
    p.add_argument("--batches", default="1,4")
    p.add_argument("--force", action="store_true", help="redo files that already exist")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--calibrate-bn", action="store_true",
                   help="measure BatchNorm statistics on random inputs (see calibrate_bn)")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    check_shared_randomize()
    os.makedirs(a.outdir, exist_ok=True)
    opsets = [int(s) for s in a.opsets.split(",") if s]
    batches = [int(s) for s in a.batches.split(",") if s]
    models = [s for s in a.models.split(",") if s]
    for name in models:
        if not hasattr(tvm, name):
            p.error(f"unknown torchvision model {name}")

    def out(fname):
        return os.path.join(a.outdir, fname)

    def need(fname):
        return a.force or not os.path.exists(out(fname))

    t_all = time.time()
    for name in models:
        onnx_todo = [op for op in opsets if need(f"{name}_op{op}.onnx")]
        ref_todo = [b for b in batches
                    if need(f"{name}_b{b}_input.npy") or need(f"{name}_b{b}_logits.npy")]
        if not onnx_todo and not ref_todo:
            print(f"{name}: up to date", flush=True)
            continue
        t0 = time.time()
        m = build_model(name, a.calibrate_bn)
        t_build = time.time() - t0
        for b in ref_todo:
            t1 = time.time()
            inp_file = f"{name}_b{b}_input.npy"
            if need(inp_file):
                g = torch.Generator().manual_seed(INPUT_SEED_BASE + b)
                x = torch.randn(b, 3, 224, 224, generator=g, dtype=torch.float32)
                save_npy(out(inp_file), x.numpy())
            else:
                # Reuse the existing input so the logits always correspond to it.
                x = torch.from_numpy(np.load(out(inp_file)))
            with torch.no_grad():
                y = m(x)
            y = y.numpy().astype(np.float32, copy=False)
            if not np.all(np.isfinite(y)):
                raise SystemExit(f"{name} b{b}: non-finite reference logits")
            save_npy(out(f"{name}_b{b}_logits.npy"), y)
            print(f"{name}: b{b} reference {list(y.shape)} |logits| max {np.abs(y).max():.4g} "
                  f"({time.time() - t1:.1f}s)", flush=True)
        for op in onnx_todo:
            t1 = time.time()
            path = out(f"{name}_op{op}.onnx")
            export(m, path, op)
            print(f"{name}: exported {path} ({os.path.getsize(path)} bytes, "
                  f"{time.time() - t1:.1f}s)", flush=True)
        print(f"{name}: done in {time.time() - t0:.1f}s (build {t_build:.1f}s)", flush=True)
    print(f"all done in {time.time() - t_all:.1f}s", flush=True)


if __name__ == "__main__":
    main()
