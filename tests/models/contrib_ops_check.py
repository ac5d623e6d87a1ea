#!/usr/bin/env python3
"""kiln's com.microsoft contrib ops (and ORT's contrib layer norms of the default domain) against
ONNX Runtime.

usage: contrib_ops_check.py KILN

Builds one small model per case (random inputs from a fixed seed, several shapes and attribute
settings, opset_import ("", 17) and ("com.microsoft", 1)), runs it with ONNX Runtime (CPU, the
pinned venv of tests/pyenv) and with `kiln run`, and compares every output:

- float32 ops (Gelu, FastGelu, BiasGelu, QuickGelu, the layer norms, FusedConv, FusedMatMul,
  NhwcConv, MultiHeadAttention, Attention): |kiln - ORT| <= 1e-6 + 1e-5 |ORT| per element. The
  attention checks include rows whose every key is masked: their logits sit near
  mask_filter_value, where ORT's float32 rounding decides (kiln follows its order of additions). NhwcConv has no CPU kernel in ORT, so
  its reference is ORT's Conv between the same Transposes (fusion_nhwc_conv.py's graph).
- MatMulIntegerToFloat, DynamicQuantizeMatMul: the integer sums are exact on both sides; the
  float epilogue (sum * (a_scale * b_scale) + bias) rounds the same way, so the same bound holds.
- DynamicQuantizeLSTM: both quantize X and every step's h_{t-1} dynamically to uint8 and sum
  in integers against the weights (7-bit int8 or uint8, initializers as ORT requires). ORT runs
  with one intra-op thread here: with a pool it quantizes each thread's block of batch rows on
  its own range when batch >= 2 and H <= 256 (or batch > 4), where kiln takes the whole batch
  (measured 0.0014 apart with ORT's default pool on 2 cores). Measured largest |kiln - ORT|
  1.0e-7 on outputs in [-1, 1] (2-core AMD EPYC AVX2, printed each run). The bound is 3e-3
  absolute (LSTM_ATOL): ORT's logistic and tanh are MLAS approximations that differ by CPU, and
  a one-ulp difference that moves a value of h_t across a rounding boundary of its uint8 grid
  shows as about 1e-3 (not seen on this machine's cases); the float LSTM kiln ran before was
  0.0027 away.
Exits 1 on any mismatch; 77 (skip) when the venv cannot be made outside CI.
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
import onnxruntime as ort  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6
LSTM_ATOL = 3e-3
FAILURES = []
RNG = np.random.default_rng(20261129)
MS = "com.microsoft"


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def f32(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def ints(dtype, *shape, seven_bit=False):
    """Uniform integers of dtype; `seven_bit`: int8 in [-64, 63]. ONNX Runtime's uint8 x int8
    kernels on AVX2 without VNNI (vpmaddubsw) saturate pairs of products at int16 on full-range
    int8 weights (measured: errors of 5 on sums near 100); its quantizer writes such weights with
    reduce_range (7 bits) for that reason, so the checks draw int8 B in that range when A is
    uint8, where ORT's sums are exact."""
    info = np.iinfo(dtype)
    lo, hi = (-64, 63) if seven_bit and dtype == np.int8 else (info.min, info.max)
    return RNG.integers(lo, hi, shape, endpoint=True).astype(dtype)


def model(nodes, inputs, outputs, consts=()):
    """inputs: name -> array (those named in `consts` become initializers); outputs: names.
    Output shapes are left unknown (kiln infers them)."""
    g = helper.make_graph(
        nodes, "contrib",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items() if n not in consts],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(inputs[n], n) for n in consts])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    return m


def run_kiln(kiln, m, inputs, tmp, tag):
    path = os.path.join(tmp, tag + ".onnx")
    onnx.save(m, path)
    cmd = [kiln, "run", path]
    for n, a in inputs.items():
        p = os.path.join(tmp, f"{tag}_{n}.npy")
        np.save(p, a)
        cmd += ["--input", f"{n}={p}"]
    out = os.path.join(tmp, tag + "_out")
    cmd += ["--output-dir", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"{tag}: kiln run (rc {r.returncode}) {r.stderr[-600:]}")
        return None
    return [np.load(os.path.join(out, o.name + ".npy")) for o in m.graph.output]


def run_ort(m, inputs, threads=0):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads  # 0: ORT's default pool
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, inputs)


def compare(kiln, tag, nodes, inputs, outputs, ref_model=None, atol=ATOL, rtol=RTOL, skip=(),
            consts=(), ort_threads=0):
    """Runs the case on both; `ref_model` replaces the model for ORT; outputs named in `skip`
    are not compared (stated by the caller); inputs named in `consts` are initializers;
    `ort_threads`: ORT's intra-op threads (0: its default)."""
    m = model(nodes, inputs, outputs, consts)
    inputs = {n: a for n, a in inputs.items() if n not in consts}
    with tempfile.TemporaryDirectory() as tmp:
        got = run_kiln(kiln, m, inputs, tmp, tag.replace(" ", "_").replace("/", "_"))
    if got is None:
        return None
    want = run_ort(ref_model if ref_model is not None else m, inputs, ort_threads)
    worst = 0.0
    for name, g, w in zip(outputs, got, want):
        if name in skip:
            continue
        if g.shape != w.shape:
            check(False, f"{tag} {name}: shape {g.shape}, ORT {w.shape}")
            continue
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        bound = atol + rtol * np.abs(w.astype(np.float64))
        bad = int(np.count_nonzero(~(err <= bound)))
        worst = max(worst, float(err.max()) if err.size else 0.0)
        check(bad == 0, f"{tag} {name} {list(w.shape)}: max |diff| {err.max() if err.size else 0:.3g}"
                        f" ({bad} of {err.size} past {atol:g} + {rtol:g}|ORT|)")
    return worst


def gelus(kiln):
    for shape in [(2, 3, 7), (1, 5, 1), (4, 33)]:
        x = f32(*shape, lo=-5, hi=5)
        h = shape[-1]
        b = f32(h)
        compare(kiln, f"Gelu {shape}", [helper.make_node("Gelu", ["x"], ["y"], domain=MS)],
                {"x": x}, ["y"])
        compare(kiln, f"FastGelu {shape}", [helper.make_node("FastGelu", ["x"], ["y"], domain=MS)],
                {"x": x}, ["y"])
        compare(kiln, f"FastGelu+bias {shape}",
                [helper.make_node("FastGelu", ["x", "b"], ["y"], domain=MS)], {"x": x, "b": b},
                ["y"])
        compare(kiln, f"BiasGelu {shape}",
                [helper.make_node("BiasGelu", ["x", "b"], ["y"], domain=MS)], {"x": x, "b": b},
                ["y"])
        for alpha in (None, 1.0, -0.5):
            kw = {} if alpha is None else {"alpha": alpha}
            compare(kiln, f"QuickGelu {shape} alpha {alpha}",
                    [helper.make_node("QuickGelu", ["x"], ["y"], domain=MS, **kw)], {"x": x},
                    ["y"])


def norms(kiln):
    for shape, skip_shape in [((2, 3, 16), (2, 3, 16)), ((2, 5, 7), (1, 5, 7)),
                              ((3, 4, 9), (4, 9)), ((6, 11), (6, 11)), ((1, 1, 64), (1, 1, 64))]:
        h = shape[-1]
        ins = {"x": f32(*shape, lo=-2, hi=3), "s": f32(*skip_shape), "g": f32(h),
               "be": f32(h), "bi": f32(h)}
        for eps in (None, 1e-5):
            kw = {} if eps is None else {"epsilon": eps}
            compare(kiln, f"SkipLayerNormalization {shape} skip {skip_shape} eps {eps}",
                    [helper.make_node("SkipLayerNormalization", ["x", "s", "g", "be", "bi"],
                                      ["y", "mean", "inv", "sum"], domain=MS, **kw)],
                    ins, ["y", "mean", "inv", "sum"])
        compare(kiln, f"SkipLayerNormalization {shape} no beta/bias",
                [helper.make_node("SkipLayerNormalization", ["x", "s", "g"], ["y"], domain=MS)],
                {k: ins[k] for k in ("x", "s", "g")}, ["y"])
        # ORT leaves SkipSimplifiedLayerNormalization's `mean` unwritten: not compared.
        compare(kiln, f"SkipSimplifiedLayerNormalization {shape} skip {skip_shape}",
                [helper.make_node("SkipSimplifiedLayerNormalization", ["x", "s", "g", "bi"],
                                  ["y", "mean", "inv", "sum"], domain=MS, epsilon=1e-6)],
                {k: ins[k] for k in ("x", "s", "g", "bi")}, ["y", "mean", "inv", "sum"],
                skip=("mean",))
    for shape, axis in [((2, 3, 16), -1), ((2, 3, 5), 1), ((4, 1), -1), ((2, 2, 3, 4), -2)]:
        n = int(np.prod(shape[axis:]))
        x = f32(*shape, lo=-2, hi=3)
        g = f32(*shape[axis:])
        b = f32(*shape[axis:])
        compare(kiln, f"SimplifiedLayerNormalization {shape} axis {axis}",
                [helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y", "inv"],
                                  axis=axis, epsilon=1e-6)],
                {"x": x, "g": g}, ["y", "inv"])
        assert n > 0
        ln = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean", "inv"],
                              axis=axis)
        m = model([ln], {"x": x, "g": g, "b": b}, ["y", "mean", "inv"])
        m.opset_import[0].version = 16  # ORT's contrib LayerNormalization (before ONNX's 17)
        with tempfile.TemporaryDirectory() as tmp:
            got = run_kiln(kiln, m, {"x": x, "g": g, "b": b}, tmp, "ln16")
        if got is not None:
            want = run_ort(m, {"x": x, "g": g, "b": b})
            for name, gv, wv in zip(["y", "mean", "inv"], got, want):
                err = np.abs(gv.astype(np.float64) - wv)
                check(gv.shape == wv.shape and bool(np.all(err <= ATOL + RTOL * np.abs(wv))),
                      f"LayerNormalization-16 (contrib form) {shape} axis {axis} {name}: "
                      f"max |diff| {err.max():.3g}")


def convs(kiln):
    acts = [("", []), ("Relu", []), ("Tanh", []), ("Sigmoid", []), ("LeakyRelu", [0.15]),
            ("Clip", [-0.3, 0.4]), ("HardSigmoid", [0.25, 0.45])]
    geoms = [((2, 3, 9, 8), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
             ((1, 4, 11, 7), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
             ((2, 5, 13), (4, 5, 3), {"strides": [2], "pads": [1, 0]})]
    for i, (act, params) in enumerate(acts):
        for xs, ws, attrs in geoms:
            x, w, b = f32(*xs), f32(*ws), f32(ws[0])
            kw = dict(attrs)
            if act:
                kw["activation"] = act
            if params:
                kw["activation_params"] = params
            conv = helper.make_node("Conv", ["x", "w"], ["c"], **attrs)
            yshape = run_ort(model([conv], {"x": x, "w": w}, ["c"]), {"x": x, "w": w})[0].shape
            z = f32(*yshape)
            with_z = i % 2 == 0
            names = ["x", "w", "b", "z"] if with_z else ["x", "w", "b"]
            ins = {"x": x, "w": w, "b": b, **({"z": z} if with_z else {})}
            compare(kiln, f"FusedConv {act or 'none'} {xs} {ws} {attrs}{' + Z' if with_z else ''}",
                    [helper.make_node("FusedConv", names, ["y"], domain=MS, **kw)], ins, ["y"])
    for xs, ws, attrs in geoms[:2] + [((2, 4, 6, 5), (3, 4, 1, 1), {})]:
        x, w, b = f32(*xs), f32(*ws), f32(ws[0])
        xl = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        wl = np.ascontiguousarray(np.moveaxis(w, 1, -1))
        ins = {"x": xl, "w": wl, "b": b}
        ref = model([helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
                     helper.make_node("Transpose", ["w"], ["wt"], perm=[0, 3, 1, 2]),
                     helper.make_node("Conv", ["xt", "wt", "b"], ["yt"], **attrs),
                     helper.make_node("Transpose", ["yt"], ["y"], perm=[0, 2, 3, 1])], ins, ["y"])
        compare(kiln, f"NhwcConv {xl.shape} {wl.shape} {attrs}",
                [helper.make_node("NhwcConv", ["x", "w", "b"], ["y"], domain=MS, **attrs)], ins,
                ["y"], ref_model=ref)


def matmuls(kiln):
    cases = [((2, 3, 4, 5), (2, 3, 5, 6), {}),
             ((3, 5, 4), (5, 7), {"transA": 1, "alpha": 0.125}),
             ((4, 5), (2, 6, 5), {"transB": 1}),
             ((2, 5, 3), (2, 1, 5), {"transA": 1, "transB": 1, "alpha": -1.5}),
             ((4, 2, 3, 5), (2, 3, 5, 6), {"transBatchA": 1}),
             ((5, 2, 3, 4), (2, 3, 5, 6), {"transBatchA": 1, "transA": 1}),
             ((3, 4, 5), (5, 3, 6), {"transBatchB": 1}),
             ((3, 4, 5), (6, 3, 5), {"transBatchB": 1, "transB": 1}),
             ((2, 4, 3, 5), (6, 4, 3, 5), {"transBatchA": 1, "transBatchB": 1, "transB": 1}),
             ((7,), (7, 3), {"alpha": 3.0})]
    for a, b, attrs in cases:
        compare(kiln, f"FusedMatMul {a} x {b} {attrs}",
                [helper.make_node("FusedMatMul", ["a", "b"], ["y"], domain=MS, **attrs)],
                {"a": f32(*a), "b": f32(*b)}, ["y"])


def quant_matmuls(kiln):
    for at, bt in [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)]:
        for a_shape, (k, n), per_col, zps, bias in [((2, 3, 17), (17, 5), True, True, True),
                                                    ((1, 9), (9, 4), False, False, False),
                                                    ((4, 64), (64, 33), True, True, False),
                                                    ((6, 8), (8, 1), False, True, True)]:
            ins = {"a": ints(at, *a_shape), "b": ints(bt, k, n, seven_bit=at == np.uint8),
                   "as": np.array(RNG.uniform(0.01, 0.05), np.float32),
                   "bs": RNG.uniform(0.001, 0.02, n if per_col else 1).astype(np.float32)}
            names = ["a", "b", "as", "bs"]
            if zps:
                ins["az"] = np.array(RNG.integers(-5, 5) + (128 if at == np.uint8 else 0), at)
                ins["bz"] = (RNG.integers(-5, 5, n if per_col else 1)
                             + (128 if bt == np.uint8 else 0)).astype(bt)
                names += ["az", "bz"]
            if bias:
                ins["bias"] = f32(n)
                names += ["", ""] if not zps else []
                names.append("bias")
            tag = (f"MatMulIntegerToFloat {np.dtype(at).name}x{np.dtype(bt).name} {a_shape} x "
                   f"[{k},{n}] per-{'column' if per_col else 'tensor'}"
                   f"{' zero points' if zps else ''}{' bias' if bias else ''}")
            compare(kiln, tag, [helper.make_node("MatMulIntegerToFloat", names, ["y"],
                                                 domain=MS)],
                    {k2: v for k2, v in ins.items()}, ["y"])
    for bt in (np.int8, np.uint8):
        for a_shape, (k, n), per_col, bias, lo in [((2, 3, 17), (17, 5), True, True, -3.0),
                                                   ((5, 32), (32, 9), False, False, -1.0),
                                                   ((1, 7), (7, 3), True, False, 0.25)]:
            ins = {"a": f32(*a_shape, lo=lo, hi=2.0), "b": ints(bt, k, n, seven_bit=True),
                   "bs": RNG.uniform(0.001, 0.02, n if per_col else 1).astype(np.float32),
                   "bz": (RNG.integers(-5, 5, n if per_col else 1)
                          + (128 if bt == np.uint8 else 0)).astype(bt)}
            names = ["a", "b", "bs", "bz"]
            if bias:
                ins["bias"] = f32(n)
                names.append("bias")
            compare(kiln, f"DynamicQuantizeMatMul {a_shape} x {np.dtype(bt).name} [{k},{n}] "
                          f"per-{'column' if per_col else 'tensor'}{' bias' if bias else ''}",
                    [helper.make_node("DynamicQuantizeMatMul", names, ["y"], domain=MS)], ins,
                    ["y"])


def quant_lstm(kiln):
    worst = 0.0
    # ORT refuses uint8 weights with per-column zero points ("InputWeight point must be
    # constant" even when they are initializers): uint8 runs per direction here.
    for direction, batch, h, wt, per_col, extras in [("forward", 3, 8, np.int8, False, True),
                                                    ("bidirectional", 2, 6, np.uint8, False, True),
                                                    ("bidirectional", 3, 7, np.int8, True, True),
                                                    ("reverse", 1, 5, np.int8, True, False),
                                                    ("forward", 4, 16, np.uint8, False, False)]:
        seq, inp = 5, 7
        dirs = 2 if direction == "bidirectional" else 1
        wf = f32(dirs, inp, 4 * h, lo=-0.6, hi=0.6)
        rf = f32(dirs, h, 4 * h, lo=-0.6, hi=0.6)

        def quantize(w):  # symmetric (int8) or asymmetric (uint8), per direction or column
            axis = (1,) if per_col else (1, 2)
            lo_, hi_ = np.minimum(w.min(axis=axis), 0), np.maximum(w.max(axis=axis), 0)
            if wt == np.int8:
                scale = (np.maximum(-lo_, hi_) / 63).astype(np.float32)  # 7 bits (ints())
                zp = np.zeros_like(scale, dtype=np.int8)
            else:
                scale = ((hi_ - lo_) / 255).astype(np.float32)
                zp = np.clip(np.round(-lo_ / scale), 0, 255).astype(np.uint8)
            s = scale[:, None, :] if per_col else scale[:, None, None]
            z = zp[:, None, :] if per_col else zp[:, None, None]
            info = np.iinfo(wt)
            lo_q, hi_q = (-64, 63) if wt == np.int8 else (info.min, info.max)
            q = np.clip(np.round(w / s) + z.astype(np.int32), lo_q, hi_q).astype(wt)
            return q, scale, zp
        wq, ws, wz = quantize(wf)
        rq, rs, rz = quantize(rf)
        ins = {"x": f32(seq, batch, inp), "w": wq, "r": rq}
        names = ["x", "w", "r"]
        if extras:
            lens = np.full(batch, seq, np.int32)
            lens[0] = 3
            ins.update({"bb": f32(dirs, 8 * h, lo=-0.3, hi=0.3), "lens": lens,
                        "h0": f32(dirs, batch, h), "c0": f32(dirs, batch, h),
                        "p": f32(dirs, 3 * h, lo=-0.3, hi=0.3)})
            names += ["bb", "lens", "h0", "c0", "p"]
        else:
            names += ["", "", "", "", ""]
        ins.update({"ws": ws, "wz": wz, "rs": rs, "rz": rz})
        names += ["ws", "wz", "rs", "rz"]
        w = compare(kiln, f"DynamicQuantizeLSTM {direction} batch {batch} H {h} "
                          f"{np.dtype(wt).name} per-{'column' if per_col else 'direction'}"
                          f"{' B lens h0 c0 P' if extras else ''}",
                    [helper.make_node("DynamicQuantizeLSTM", names, ["y", "yh", "yc"],
                                      domain=MS, hidden_size=h, direction=direction)],
                    ins, ["y", "yh", "yc"], atol=LSTM_ATOL, rtol=0.0,
                    consts=("w", "r", "ws", "wz", "rs", "rz"), ort_threads=1)
        worst = max(worst, w or 0.0)
    print(f"     DynamicQuantizeLSTM: largest |kiln - ORT| over all outputs {worst:.3g} "
          f"(both quantize X and h_t to uint8; ORT with one thread)")


def mha(kiln):
    """MultiHeadAttention: 3-D and 4-D key/value (ORT wants 4-D value shaped as key), bias, each key padding mask form,
    attention_bias, causal (self and cross), past/present."""
    def node(names, outs=("y",), **kw):
        return [helper.make_node("MultiHeadAttention", list(names), list(outs), domain=MS, **kw)]
    for B, S, L, N, H, Hv in [(2, 3, 5, 2, 4, 4), (1, 1, 7, 3, 3, 5), (3, 4, 4, 1, 8, 8),
                              (2, 5, 3, 4, 2, 3)]:
        D, Dv = N * H, N * Hv
        ins = {"q": f32(B, S, D, lo=-2, hi=2), "k": f32(B, L, D, lo=-2, hi=2), "v": f32(B, L, Dv)}
        tag = f"MultiHeadAttention B{B} S{S} L{L} N{N} H{H} Hv{Hv}"
        compare(kiln, tag, node("qkv", num_heads=N), ins, ["y"])
        compare(kiln, tag + " bias scale 0.3", node("qkvb", num_heads=N, scale=0.3),
                {**ins, "b": f32(D + D + Dv)}, ["y"])
        lens = RNG.integers(1, L + 1, B).astype(np.int32)
        compare(kiln, tag + " key lengths", node(["q", "k", "v", "", "m"], num_heads=N),
                {**ins, "m": lens}, ["y"])
        keys = (RNG.uniform(0, 1, (B, L)) > 0.3).astype(np.int32)
        compare(kiln, tag + " key mask [B,L] filter -7",
                node(["q", "k", "v", "", "m"], num_heads=N, mask_filter_value=-7.0),
                {**ins, "m": keys}, ["y"])
        qk = (RNG.uniform(0, 1, (B, S, L)) > 0.3).astype(np.int32)
        for ab_shape in [(1, 1, S, L), (B, N, S, L), (B, 1, S, L)]:
            compare(kiln, tag + f" mask [B,S,L] attention_bias {ab_shape}",
                    node(["q", "k", "v", "b", "m", "ab"], num_heads=N),
                    {**ins, "b": f32(D + D + Dv), "m": qk, "ab": f32(*ab_shape, lo=-3, hi=3)},
                    ["y"])
        compare(kiln, tag + " causal", node("qkv", num_heads=N, unidirectional=1), ins, ["y"])
        compare(kiln, tag + " 4-D key/value, bias",
                node("qkvb", num_heads=N),
                {"q": ins["q"], "k": f32(B, N, L, H), "v": f32(B, N, L, H),
                 "b": f32(3 * D)}, ["y"])
        P = 2
        if H == Hv:  # ORT wants past_value's head size to be key's
            self_ins = {"q": ins["q"], "k": f32(B, S, D), "v": f32(B, S, Dv),
                        "pk": f32(B, N, P, H), "pv": f32(B, N, P, Hv),
                        "m": (RNG.uniform(0, 1, (B, P + S)) > 0.2).astype(np.int32)}
            compare(kiln, tag + " past, causal, mask [B,T], presents",
                    node(["q", "k", "v", "", "m", "", "pk", "pv"], ("y", "pk_out", "pv_out"),
                         num_heads=N, unidirectional=1), self_ins, ["y", "pk_out", "pv_out"])
        compare(kiln, tag + " 4-D key/value with past",
                node(["q", "k", "v", "", "", "", "pk", "pv"], ("y", "pk_out", "pv_out"),
                     num_heads=N),
                {"q": ins["q"], "k": f32(B, N, L, H), "v": f32(B, N, L, H),
                 "pk": f32(B, N, P, H), "pv": f32(B, N, P, H)},
                ["y", "pk_out", "pv_out"])
    # Rows whose every key is masked (length 0, an all-zero row): ORT's float32 logits.
    ins = {"q": f32(2, 3, 8, lo=-2, hi=2), "k": f32(2, 5, 8, lo=-2, hi=2), "v": f32(2, 5, 8)}
    compare(kiln, "MultiHeadAttention key length 0", node(["q", "k", "v", "", "m"], num_heads=2),
            {**ins, "m": np.array([0, 5], np.int32)}, ["y"])
    compare(kiln, "MultiHeadAttention all-zero key mask row",
            node(["q", "k", "v", "", "m"], num_heads=2),
            {**ins, "m": np.array([[0, 0, 0, 0, 0], [1, 0, 1, 1, 0]], np.int32)}, ["y"])


def attention(kiln):
    """Attention (BERT form): each mask_index form ORT's CPU kernel takes, causal, past/present,
    qkv_hidden_sizes, attention_bias, no bias."""
    def node(names, outs=("y",), **kw):
        return [helper.make_node("Attention", list(names), list(outs), domain=MS, **kw)]
    for B, S, C, N, sizes in [(2, 3, 8, 2, None), (1, 5, 6, 3, (6, 6, 9)), (3, 1, 4, 1, None),
                              (2, 4, 10, 2, (4, 4, 6))]:
        W = 3 * C if sizes is None else sum(sizes)
        kw = {"num_heads": N, **({} if sizes is None else {"qkv_hidden_sizes": list(sizes)})}
        ins = {"x": f32(B, S, C, lo=-2, hi=2), "w": f32(C, W), "b": f32(W)}
        tag = f"Attention B{B} S{S} C{C} N{N} sizes {sizes}"
        compare(kiln, tag, node("xwb", **kw), ins, ["y"], consts=("w", "b"))
        compare(kiln, tag + " no bias, scale 0.2", node(["x", "w", ""], scale=0.2, **kw),
                {"x": ins["x"], "w": ins["w"]}, ["y"], consts=("w",))
        ends = RNG.integers(1, S + 1, B).astype(np.int32)
        starts = np.minimum(RNG.integers(0, S, B), ends - 1).astype(np.int32)
        masks = {"lengths [B]": ends, "ends, starts [2B]": np.concatenate([ends, starts]),
                 "[B,T]": (RNG.uniform(0, 1, (B, S)) > 0.3).astype(np.int32),
                 "[B,S,T]": (RNG.uniform(0, 1, (B, S, S)) > 0.3).astype(np.int32)}
        for name, m in masks.items():
            for uni in (0, 1):
                compare(kiln, tag + f" mask {name}{' causal' if uni else ''}",
                        node("xwbm", unidirectional=uni, mask_filter_value=-9.0, **kw),
                        {**ins, "m": m}, ["y"], consts=("w", "b"))
        for ab_shape in [(1, N, S, S), (B, 1, S, S)]:
            compare(kiln, tag + f" attention_bias {ab_shape}",
                    node(["x", "w", "b", "", "", "ab"], **kw),
                    {**ins, "ab": f32(*ab_shape, lo=-3, hi=3)}, ["y"], consts=("w", "b"))
        if sizes is None or sizes[1] == sizes[2]:
            P, H = 3, (C if sizes is None else sizes[0]) // N
            pins = {**ins, "past": f32(2, B, N, P, H),
                    "m": (RNG.uniform(0, 1, (B, P + S)) > 0.2).astype(np.int32)}
            compare(kiln, tag + " past, mask [B,T], causal, present",
                    node(["x", "w", "b", "m", "past"], ("y", "present"), unidirectional=1, **kw),
                    pins, ["y", "present"], consts=("w", "b"))
            compare(kiln, tag + " present without past", node("xwb", ("y", "present"), **kw),
                    ins, ["y", "present"], consts=("w", "b"))


def main():
    kiln = sys.argv[1]
    gelus(kiln)
    norms(kiln)
    convs(kiln)
    matmuls(kiln)
    quant_matmuls(kiln)
    quant_lstm(kiln)
    mha(kiln)
    attention(kiln)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all contrib op checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
