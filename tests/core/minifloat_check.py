#!/usr/bin/env python3
"""kiln's 8-bit float, float4e2m1 and 4-bit integer conversions against ml_dtypes and ONNX's own
reference, on every float16 value.

usage: minifloat_check.py KILN

One model (opset 24) takes x, all 65,536 float16 bit patterns, and casts it to each of
float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz (saturate 1 and 0), float4e2m1, int4 and
uint4, and back to float32; a second takes float32 values (every float16 value widened, plus
random bit patterns that set each mantissa bit) and casts them to float8e8m0 with each round_mode
and saturate, and back. `kiln run` writes the float32 outputs; each must equal, bit for bit (NaN's
sign included), what ONNX's reference computes for the same graph: ml_dtypes 0.5.1's
conversions (onnx.numpy_helper.saturate_cast, to_float8e8m0) in the pinned venv of tests/pyenv.
A kiln conversion off by one code anywhere fails here. One stated exception: E8M0 "up" where
the reference's mantissa mask skips bits 20-21 (see the check).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyenv"))
import check_venv  # noqa: E402

check_venv.reexec_in_venv()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def round_trip_model(x_type, targets, raw=()):
    """x -> Cast(to=T, attrs) -> Cast(to=FLOAT) for each (name, T, attrs); the casts named in
    `raw` are graph outputs too (kiln writes them as .npy raw bytes)."""
    nodes, outs = [], []
    for name, t, attrs in targets:
        nodes.append(helper.make_node("Cast", ["x"], [name + "_q"], to=t, **attrs))
        nodes.append(helper.make_node("Cast", [name + "_q"], [name], to=TP.FLOAT))
        outs.append(helper.make_tensor_value_info(name, TP.FLOAT, [None]))
        if name in raw:
            outs.append(helper.make_tensor_value_info(name + "_q", t, [None]))
    g = helper.make_graph(nodes, "minifloat", [helper.make_tensor_value_info("x", x_type, [None])],
                          outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
    m.ir_version = 11
    onnx.checker.check_model(m)
    return m


def run_both(kiln, model, x, tmp, tag):
    path = os.path.join(tmp, tag + ".onnx")
    onnx.save(model, path)
    np.save(os.path.join(tmp, tag + "_x.npy"), x)
    out = os.path.join(tmp, tag + "_out")
    r = subprocess.run([kiln, "run", path, "--input", "x=" + os.path.join(tmp, tag + "_x.npy"),
                        "--output-dir", out], capture_output=True, text=True)
    check(r.returncode == 0, f"kiln run {tag} (rc {r.returncode}) {r.stderr[-400:]}")
    if r.returncode != 0:
        return
    ref = ReferenceEvaluator(model)
    names = [o.name for o in model.graph.output]
    want = ref.run(None, {"x": x})
    for name, w in zip(names, want):
        g = np.load(os.path.join(out, name + ".npy"))
        if name.endswith("_q"):  # a type numpy lacks: raw bytes, viewed as ml_dtypes' type
            check(g.dtype.kind == "V" and g.dtype.itemsize == w.dtype.itemsize,
                  f"{tag} {name}.npy: raw bytes of {w.dtype} ({g.dtype})")
            same = g.view(np.uint8) == w.view(np.uint8)
            check(g.shape == w.shape and bool(np.all(same)),
                  f"{tag} {name}.npy viewed as {w.dtype}: bytes identical "
                  f"({int((~same).sum())} differ)")
            continue
        wb, gb = w.astype(np.float32).view(np.uint32), g.view(np.uint32)
        differ = wb != gb
        if "e8m0_up" in name:
            # ONNX 1.19's reference rounds "up" only when mantissa bits 22 or 0-19 are set (mask
            # 0x4FFFFF in numpy_helper.to_float8e8m0); the operator's definition, and kiln, round
            # up on any mantissa bit. Where only bits 20-21 are set kiln must give the next power
            # of two (or 0xFE's value when saturating at the top): exactly that, nowhere else.
            xb = x.astype(np.float32).view(np.uint32)
            quirk = ((xb & 0x4FFFFF) == 0) & ((xb & 0x300000) != 0) & (((xb >> 23) & 0xFF) != 0xFF)
            top = ((xb >> 23) & 0xFF) == 0xFE
            wf = w.astype(np.float32)
            doubled = (g == np.float32(2) * wf) | (top & (g == wf))
            if name.endswith("sat0"):
                doubled |= top & np.isnan(g)
            check(bool(np.all(doubled[quirk])) and int(quirk.sum()) > 0,
                  f"{tag} {name}: the {int(quirk.sum())} values whose mantissa has only bits "
                  f"20-21 set round up (ONNX's reference mask 0x4FFFFF leaves them down)")
            differ &= ~quirk
        bad = np.flatnonzero(differ)
        detail = ""
        if bad.size:
            i = bad[0]
            detail = f": first at x={x[i]!r} kiln {g[i]!r} (0x{gb[i]:08x}) ONNX {w[i]!r} (0x{wb[i]:08x})"
        check(bad.size == 0, f"{tag} {name}: {x.size} values bit-identical "
                             f"({bad.size} differ){detail}")


def main():
    kiln = sys.argv[1]
    f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    targets = []
    for t in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ"):
        for sat in (1, 0):
            targets.append((f"{t.lower()}_sat{sat}", getattr(TP, t), {"saturate": sat}))
    for t in ("FLOAT4E2M1", "INT4", "UINT4"):
        targets.append((t.lower(), getattr(TP, t), {}))
    # int4/uint4 from values past int64 or non-finite are left open by ONNX (numpy warns): keep
    # the finite float16 values, all of which fit in int64.
    with tempfile.TemporaryDirectory() as tmp:
        run_both(kiln, round_trip_model(TP.FLOAT16, targets[:8] + targets[8:9],
                                        raw=("float8e4m3fn_sat1", "float4e2m1")), f16, tmp, "f16")
        finite = f16[np.isfinite(f16)]
        run_both(kiln, round_trip_model(TP.FLOAT16, targets[9:]), finite, tmp, "f16_int4")
        rng = np.random.default_rng(7)
        bits = rng.integers(0, 2**32, size=200000, dtype=np.uint64).astype(np.uint32)
        x32 = np.concatenate([f16.astype(np.float32), bits.view(np.float32),
                              np.float32([0, -0.0, np.inf, -np.inf, np.nan, 2.0**127, 3.0 * 2**126,
                                          np.finfo(np.float32).max])])
        e8 = [(f"e8m0_{mode}_sat{sat}", TP.FLOAT8E8M0, {"saturate": sat, "round_mode": mode})
              for mode in ("up", "down", "nearest") for sat in (1, 0)]
        run_both(kiln, round_trip_model(TP.FLOAT, e8), x32, tmp, "f32_e8m0")
    if FAILURES:
        print(f"\n{len(FAILURES)} failed")
        sys.exit(1)
    print("\nall conversions bit-identical to ONNX's reference, but the stated E8M0 \"up\" exception")


if __name__ == "__main__":
    main()
