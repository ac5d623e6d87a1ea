#!/usr/bin/python3
"""Stand-in for `kiln run` that interprets an ONNX graph with torch.nn.functional ops.

usage: /usr/bin/python3 tests/models/torch_onnx_runner.py run MODEL.onnx --input FILE.npy --output-dir DIR

Same CLI contract as kiln: feeds FILE.npy to the graph's (single) non-initializer input and writes
DIR/<output name>.npy for each graph output. It only knows the ops that appear in the demo and
torchvision exports (see OPS below) and is meant for self-testing the test harness
(run_torchvision_check.sh) and for checking that the exported ONNX files agree with the PyTorch
reference outputs, independently of kiln. Not a general ONNX runtime.
"""
import argparse
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _pads2d(a, x):
    p = list(a.get("pads", [0, 0, 0, 0]))
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("auto_pad")
    if p[0] == p[2] and p[1] == p[3]:
        return x, (p[0], p[1])
    return F.pad(x, (p[1], p[3], p[0], p[2])), (0, 0)


def op_conv(n, a, x, w, b=None):
    x, pad = _pads2d(a, x)
    return F.conv2d(x, w, b, stride=a.get("strides", [1, 1]), padding=pad,
                    dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1))


def op_maxpool(n, a, x):
    if a.get("ceil_mode", 0) or a.get("storage_order", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise NotImplementedError("MaxPool attrs")
    p = a.get("pads", [0, 0, 0, 0])
    if p[0] != p[2] or p[1] != p[3]:
        raise NotImplementedError("asymmetric MaxPool pads")
    return F.max_pool2d(x, a["kernel_shape"], a.get("strides", a["kernel_shape"]), (p[0], p[1]))


def op_gemm(n, a, x, w, c=None):
    x = x.t() if a.get("transA", 0) else x
    w = w.t() if a.get("transB", 0) else w
    y = a.get("alpha", 1.0) * (x @ w)
    return y if c is None else y + a.get("beta", 1.0) * c


def op_clip(n, a, x, lo=None, hi=None):
    if "min" in a or "max" in a:  # opset < 11
        lo, hi = a.get("min"), a.get("max")
    lo = None if lo is None else float(lo)
    hi = None if hi is None else float(hi)
    return torch.clamp(x, lo, hi)


def op_reducemean(n, a, x, axes=None):
    axes = a.get("axes") if axes is None else axes.tolist()
    keep = bool(a.get("keepdims", 1))
    if axes is None or len(axes) == 0:
        return x.mean(dim=tuple(range(x.dim())), keepdim=keep)
    return x.mean(dim=tuple(axes), keepdim=keep)


def op_layernorm(n, a, x, scale, bias=None):
    axis = a.get("axis", -1) % x.dim()
    return F.layer_norm(x, x.shape[axis:], scale, bias, a.get("epsilon", 1e-5))


OPS = {
    "Conv": op_conv,
    "MaxPool": op_maxpool,
    "Gemm": op_gemm,
    "Clip": op_clip,
    "ReduceMean": op_reducemean,
    "LayerNormalization": op_layernorm,
    "Relu": lambda n, a, x: F.relu(x),
    "Sigmoid": lambda n, a, x: torch.sigmoid(x),
    "Erf": lambda n, a, x: torch.erf(x),
    "Sqrt": lambda n, a, x: torch.sqrt(x),
    "Add": lambda n, a, x, y: x + y,
    "Sub": lambda n, a, x, y: x - y,
    "Mul": lambda n, a, x, y: x * y,
    "Div": lambda n, a, x, y: x / y,
    "Pow": lambda n, a, x, y: torch.pow(x, y),
    "MatMul": lambda n, a, x, y: torch.matmul(x, y),
    "GlobalAveragePool": lambda n, a, x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True),
    "Flatten": lambda n, a, x: x.reshape(int(np.prod(x.shape[:a.get("axis", 1) % max(x.dim(), 1)])), -1),
    "Transpose": lambda n, a, x: x.permute(*a.get("perm", list(range(x.dim()))[::-1])),
    "Reshape": lambda n, a, x, s: x.reshape([x.shape[i] if v == 0 else int(v) for i, v in enumerate(s.tolist())]),
}


def run_graph(model, feeds):
    env = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in model.graph.initializer}
    env.update({k: torch.from_numpy(v) for k, v in feeds.items()})
    for node in model.graph.node:
        a = _attrs(node)
        if node.op_type == "Constant":
            env[node.output[0]] = torch.from_numpy(numpy_helper.to_array(a["value"]).copy())
            continue
        if node.op_type not in OPS:
            raise NotImplementedError(f"op {node.op_type} ({node.name})")
        ins = [env[i] if i else None for i in node.input]
        env[node.output[0]] = OPS[node.op_type](node, a, *ins)
    return {o.name: env[o.name] for o in model.graph.output}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["run"])
    p.add_argument("model")
    p.add_argument("--input", required=True)
    p.add_argument("--output-dir", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    model = onnx.load(a.model)
    init_names = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in init_names]
    if len(inputs) != 1:
        print(f"expected one graph input, got {inputs}", file=sys.stderr)
        return 2
    with torch.no_grad():
        outs = run_graph(model, {inputs[0]: np.load(a.input)})
    os.makedirs(a.output_dir, exist_ok=True)
    for name, t in outs.items():
        np.save(os.path.join(a.output_dir, f"{name}.npy"), t.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
