#!/usr/bin/python3
"""kiln's sampling ops against PyTorch's own functions (Debian's torch and torchvision), beyond
ONNX's node tests: GridSample (16: 4-D, every mode x padding x align_corners; 20: 5-D),
AffineGrid (20, 2-D and 3-D), Col2Im (18, against torch's fold), DeformConv (19, against
torchvision.ops.deform_conv2d: mask, groups, offset groups, stride, dilation, padding) and
Resize-18 antialias (against F.interpolate(antialias=True): exclude_outside=1 and, for cubic,
cubic_coeff_a=-0.5, which is how PyTorch and PIL filter).

LSTM, GRU (linear_before_reset=1, PyTorch's form) and RNN (Tanh, Relu) against torch.nn's layers
with the same weights, gates reordered to ONNX's order: bidirectional, batch_first (layout 1),
initial states, and sequence_lens against packed sequences; and a small CRNN (convolutions, a
two-layer bidirectional LSTM, a GRU, an RNN, a Linear) exported by torch.onnx.export itself.

Each case is a one-node ONNX model written with the pinned onnx package, run by `kiln run` with
the default (optimized) plan, and compared with PyTorch's output at rtol 1e-4 / atol 1e-5
(PyTorch computes in float32, kiln's reference kernels in double).

usage: tests/models/torch_ops_check.py KILN_BINARY WORKDIR   (exit 0 and "ok: ..." when all match;
77 when the check venv cannot be made; under CI a failure, check_venv.skip)
"""
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyenv"))
import check_venv  # noqa: E402

check_venv.reexec_in_venv()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

kiln, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
RTOL, ATOL = 1e-4, 1e-5
failures, worst, count = [], 0.0, 0
rng = np.random.default_rng(7)


def run_case(name, opset, op, inputs, want, attrs, consts=None, node_inputs=None, out_slot=0):
    """inputs: [(name, array)] fed at run time; consts: [(name, array)] as initializers;
    node_inputs: the node's input names in order ("" for an absent one), by default inputs then
    consts; out_slot: which of the node's outputs is compared (the others are not produced)."""
    global worst, count
    consts = consts or []
    if node_inputs is None:
        node_inputs = [n for n, _ in inputs] + [n for n, _ in consts]
    node = helper.make_node(op, node_inputs, [""] * out_slot + ["y"], **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * want.ndim)],
        [numpy_helper.from_array(a, n) for n, a in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    args = [kiln, "run", path, "-o", os.path.join(d, "out")]
    for n, a in inputs:
        np.save(os.path.join(d, n + ".npy"), a)
        args += ["--input", f"{n}={os.path.join(d, n + '.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{name}: kiln run failed ({r.returncode}): {r.stderr.strip()[-600:]}")
        return
    got = np.load(os.path.join(d, "out", "y.npy"))
    count += 1
    if got.shape != want.shape:
        failures.append(f"{name}: shape {got.shape}, PyTorch {want.shape}")
        return
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    worst = max(worst, float(err.max()) if err.size else 0.0)
    bad = err > ATOL + RTOL * np.abs(want)
    if bad.any():
        failures.append(f"{name}: {int(bad.sum())} of {bad.size} values differ, max abs err "
                        f"{float(err.max()):.3g}")


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# GridSample-16 (4-D, ONNX names = PyTorch's) and GridSample-20 (5-D, volumetric: PyTorch has
# bilinear and nearest there); grids reach past [-1, 1] so every padding mode matters.
for opset, x, grid, modes in (
        (16, f32(2, 3, 7, 9), rng.uniform(-1.3, 1.3, (2, 5, 6, 2)),
         (("bilinear", "bilinear"), ("nearest", "nearest"), ("bicubic", "bicubic"))),
        (20, f32(1, 2, 4, 5, 6), rng.uniform(-1.2, 1.2, (1, 3, 4, 2, 3)),
         (("bilinear", "linear"), ("nearest", "nearest")))):
    grid = grid.astype(np.float32)
    for mode, onnx_mode in modes:
        for pad in ("zeros", "border", "reflection"):
            for align in (0, 1):
                want = F.grid_sample(torch.from_numpy(x), torch.from_numpy(grid), mode=mode,
                                     padding_mode=pad, align_corners=bool(align)).numpy()
                run_case(f"gridsample{opset}_{onnx_mode}_{pad}_{align}", opset, "GridSample",
                         [("x", x), ("grid", grid)], want,
                         dict(mode=onnx_mode, padding_mode=pad, align_corners=align))

# AffineGrid-20.
for size in ((2, 3, 5, 7), (2, 1, 3, 4, 6)):
    r = len(size) - 2
    theta = f32(2, r, r + 1)
    for align in (0, 1):
        want = F.affine_grid(torch.from_numpy(theta), list(size), align_corners=bool(align)).numpy()
        run_case(f"affinegrid_{r}d_{align}", 20, "AffineGrid", [("theta", theta)], want,
                 dict(align_corners=align), consts=[("size", np.array(size, np.int64))])

# Col2Im-18 against fold (torch pads symmetrically).
for image, block, dil, pad, stride in (((6, 7), (2, 3), (1, 1), (0, 0), (1, 1)),
                                       ((9, 8), (3, 2), (2, 1), (1, 2), (2, 1)),
                                       ((5, 5), (1, 1), (1, 1), (1, 1), (3, 3))):
    blocks = [(image[i] + 2 * pad[i] - dil[i] * (block[i] - 1) - 1) // stride[i] + 1
              for i in range(2)]
    cols = f32(2, 3 * block[0] * block[1], blocks[0] * blocks[1])
    want = F.fold(torch.from_numpy(cols), image, block, dilation=dil, padding=pad,
                  stride=stride).numpy()
    run_case(f"col2im_{image[0]}x{image[1]}_k{block[0]}{block[1]}_d{dil[0]}{dil[1]}"
             f"_p{pad[0]}{pad[1]}_s{stride[0]}{stride[1]}", 18, "Col2Im", [("cols", cols)], want,
             dict(dilations=list(dil), pads=list(pad) * 2, strides=list(stride)),
             consts=[("image_shape", np.array(image, np.int64)),
                     ("block_shape", np.array(block, np.int64))])

# DeformConv-19 against torchvision.ops.deform_conv2d.
for name, c, m, k, groups, og, stride, pad, dil, use_mask, use_bias in (
        ("basic", 3, 4, (3, 3), 1, 1, (1, 1), (1, 1), (1, 1), False, True),
        ("mask_groups", 4, 6, (3, 2), 2, 2, (2, 1), (1, 0), (1, 2), True, True),
        ("offset_groups", 6, 3, (2, 2), 1, 3, (1, 2), (0, 1), (2, 1), True, False)):
    x = f32(2, c, 8, 7)
    w = f32(m, c // groups, *k, scale=0.5)
    oh = (8 + 2 * pad[0] - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
    ow = (7 + 2 * pad[1] - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
    off = f32(2, og * k[0] * k[1] * 2, oh, ow, scale=1.5)  # reaches outside the image
    b = f32(m)
    mask = rng.uniform(0, 1, (2, og * k[0] * k[1], oh, ow)).astype(np.float32)
    want = torchvision.ops.deform_conv2d(
        torch.from_numpy(x), torch.from_numpy(off), torch.from_numpy(w),
        torch.from_numpy(b) if use_bias else None, stride=stride, padding=pad, dilation=dil,
        mask=torch.from_numpy(mask) if use_mask else None).numpy()
    inputs = [("x", x), ("w", w), ("offset", off)]
    if use_bias or use_mask:
        inputs.append(("b", b if use_bias else np.zeros(m, np.float32)))
    if use_mask:
        inputs.append(("mask", mask))
    run_case(f"deformconv_{name}", 19, "DeformConv", inputs, want,
             dict(group=groups, offset_group=og, strides=list(stride), pads=list(pad) * 2,
                  dilations=list(dil), kernel_shape=list(k)))

# Resize-18 antialias against F.interpolate(antialias=True): shrinking (and one dim growing).
xr = f32(2, 3, 32, 27)
for mode, onnx_mode, a in (("bilinear", "linear", -0.75), ("bicubic", "cubic", -0.5)):
    for size in ((13, 9), (8, 30), (5, 5)):
        want = F.interpolate(torch.from_numpy(xr), size=size, mode=mode, align_corners=False,
                             antialias=True).numpy()
        run_case(f"resize_antialias_{onnx_mode}_{size[0]}x{size[1]}", 18, "Resize",
                 [("x", xr)], want,
                 dict(mode=onnx_mode, antialias=1, exclude_outside=1, cubic_coeff_a=a,
                      coordinate_transformation_mode="half_pixel"),
                 consts=[("roi", np.zeros(0, np.float32)), ("scales", np.zeros(0, np.float32)),
                         ("sizes", np.array((2, 3) + size, np.int64))])

# LSTM, GRU and RNN (opset 14) against torch.nn. ONNX's gate orders: LSTM i, o, f, c (PyTorch
# i, f, g, o); GRU z, r, h (PyTorch r, z, n), with linear_before_reset=1 as PyTorch computes it.
ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN": (0,)}
torch.manual_seed(11)
for op, act, dirs, batch_first, with_state, with_lens in (
        ("RNN", "tanh", 1, False, True, False), ("RNN", "relu", 2, True, False, False),
        ("RNN", "tanh", 2, False, True, True), ("GRU", "", 2, False, True, False),
        ("GRU", "", 1, True, False, False), ("GRU", "", 2, False, False, True),
        ("LSTM", "", 2, False, True, False), ("LSTM", "", 1, True, True, True)):
    seq, batch, n_in, hid = 6, 3, 5, 8
    kw = dict(bidirectional=dirs == 2, batch_first=batch_first)
    layer = (torch.nn.RNN(n_in, hid, nonlinearity=act, **kw) if op == "RNN" else
             getattr(torch.nn, op)(n_in, hid, **kw))
    gates = len(ORDER[op])

    def onnx_weights(kind):
        mats = []
        for d in range(dirs):
            t = getattr(layer, f"{kind}_l0" + ("_reverse" if d else "")).detach().numpy()
            mats.append(np.concatenate([t[g * hid:(g + 1) * hid] for g in ORDER[op]]))
        return np.stack(mats).astype(np.float32)

    w, r = onnx_weights("weight_ih"), onnx_weights("weight_hh")
    b = np.concatenate([onnx_weights("bias_ih"), onnx_weights("bias_hh")], axis=1)
    x = f32(batch, seq, n_in) if batch_first else f32(seq, batch, n_in)
    h0 = f32(dirs, batch, hid, scale=0.5)
    c0 = f32(dirs, batch, hid, scale=0.5)
    lens = np.array([6, 2, 4], np.int32)
    tx = torch.from_numpy(x)
    state = None
    if with_state:
        state = (torch.from_numpy(h0), torch.from_numpy(c0)) if op == "LSTM" else torch.from_numpy(h0)
    with torch.no_grad():
        if with_lens:
            packed = torch.nn.utils.rnn.pack_padded_sequence(
                tx, torch.from_numpy(lens).long(), batch_first=batch_first, enforce_sorted=False)
            out, hn = layer(packed, state)
            out = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first,
                                                         total_length=seq)[0]
        else:
            out, hn = layer(tx, state)
    if op == "LSTM":
        hn = hn[0]
    out, hn = out.numpy(), hn.numpy()
    # PyTorch: out [seq, batch, dirs*H] (batch_first: [batch, seq, dirs*H]), h_n [dirs, batch, H];
    # ONNX: Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), Y_h [dirs, batch, H]
    # (layout 1: [batch, dirs, H]).
    if batch_first:
        want_y = out.reshape(batch, seq, dirs, hid)
        want_h = hn.transpose(1, 0, 2)
        h0_in, c0_in = h0.transpose(1, 0, 2).copy(), c0.transpose(1, 0, 2).copy()
    else:
        want_y = out.reshape(seq, batch, dirs, hid).transpose(0, 2, 1, 3)
        want_h = hn
        h0_in, c0_in = h0, c0
    inputs = [("x", x)]
    names = ["x", "w", "r", "b", "", ""]
    if with_lens:
        inputs.append(("lens", lens))
        names[4] = "lens"
    if with_state:
        inputs.append(("h0", h0_in))
        names[5] = "h0"
        if op == "LSTM":
            inputs.append(("c0", c0_in))
            names.append("c0")
    attrs = dict(hidden_size=hid, layout=int(batch_first),
                 direction="bidirectional" if dirs == 2 else "forward")
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    if op == "RNN":
        attrs["activations"] = [act.capitalize()] * dirs
    tag = (f"{op.lower()}{'_' + act if act else ''}_{'bi' if dirs == 2 else 'fwd'}"
           f"{'_batchfirst' if batch_first else ''}{'_state' if with_state else ''}"
           f"{'_lens' if with_lens else ''}")
    for slot, want in ((0, want_y), (1, want_h)):
        run_case(f"{tag}_{'y' if slot == 0 else 'yh'}", 14, op, inputs, np.ascontiguousarray(want),
                 attrs, consts=[("w", w), ("r", r), ("b", b)], node_inputs=names, out_slot=slot)

# A small CRNN text recognizer as PyTorch's own exporter writes it (torch.onnx.export, opset 14):
# convolutions, the feature map read as a sequence, a two-layer bidirectional LSTM, a GRU and a
# Linear, against PyTorch on the same input.
class Crnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d((2, 2)),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d((4, 1)))
        self.lstm = torch.nn.LSTM(32 * 2, 48, num_layers=2, bidirectional=True)
        self.gru = torch.nn.GRU(96, 40)
        self.rnn = torch.nn.RNN(40, 24, nonlinearity="relu", batch_first=True)
        self.fc = torch.nn.Linear(24, 37)

    def forward(self, x):
        f = self.conv(x)                                    # [N, 32, 2, W/2]
        f = f.flatten(1, 2).permute(2, 0, 1)                # [W/2, N, 64]
        f, _ = self.lstm(f)
        f, _ = self.gru(f)
        f, _ = self.rnn(f.permute(1, 0, 2))                 # batch_first
        return self.fc(f)                                   # [N, W/2, 37]


crnn = Crnn().eval()
xc = f32(2, 1, 16, 40)
with torch.no_grad():
    want = crnn(torch.from_numpy(xc)).numpy()
d = os.path.join(work, "crnn_export")
os.makedirs(d, exist_ok=True)
path = os.path.join(d, "model.onnx")
with warnings.catch_warnings():  # the exporter's notes on LSTM batch sizes
    warnings.simplefilter("ignore")
    torch.onnx.export(crnn, torch.from_numpy(xc), path, opset_version=14, input_names=["x"],
                      output_names=["y"])
np.save(os.path.join(d, "x.npy"), xc)
r = subprocess.run([kiln, "run", path, "-o", os.path.join(d, "out"), "--input",
                    f"x={os.path.join(d, 'x.npy')}"], capture_output=True, text=True)
if r.returncode != 0:
    failures.append(f"crnn_export: kiln run failed ({r.returncode}): {r.stderr.strip()[-600:]}")
else:
    got = np.load(os.path.join(d, "out", "y.npy"))
    count += 1
    err = np.abs(got.astype(np.float64) - want)
    worst = max(worst, float(err.max()))
    if got.shape != want.shape or (err > ATOL + RTOL * np.abs(want)).any():
        failures.append(f"crnn_export: shape {got.shape} vs {want.shape}, max abs err "
                        f"{float(err.max()):.3g}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"ok: {count} cases match PyTorch (rtol {RTOL}, atol {ATOL}); worst abs err {worst:.3g}")
