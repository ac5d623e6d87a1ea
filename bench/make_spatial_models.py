#!/usr/bin/env python3
"""One-node models of the spatial ops (GridSample, DeformConv, Col2Im, AffineGrid, Resize) with inputs.

    bench/.venv/bin/python bench/make_spatial_models.py [OUT_DIR]

Writes OUT_DIR/<name>.onnx and OUT_DIR/<name>.<input>.npy (default bench/.work/spatial), and
prints, per model, the bench/compare options that run it on those inputs:

    bench/compare $(bench/.venv/bin/python bench/make_spatial_models.py --args deform_dcn) \\
        --batches 1 --rounds 5 --runtimes kiln,ort,ov-f32

Shapes are those of the layers these ops appear in: a GridSample warping a feature map by flow
(the identity grid plus N(0, 0.05) noise), a DCNv2 3x3 layer of a detector neck (offsets N(0, 2)
pixels, a sigmoid mask), a Col2Im folding 3x3 patches back (torch's nn.Fold), AffineGrid of
a spatial transformer, and Resize in the forms oneDNN's resampling does not compute.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def one_node(name, op, opset, inputs, outputs, weights=(), **attrs):
    """inputs: [(name, array)] fed at run time; weights: names among them that become
    initializers instead; outputs: [(name, rank)]. Returns the model and its run-time inputs."""
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], **attrs)
    fed = [(n, a) for n, a in inputs if n not in weights]
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
         for n, a in fed],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None] * r) for n, r in outputs],
        [numpy_helper.from_array(a, n) for n, a in inputs if n in weights])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m, fed


def identity_grid(n, h, w, rng):
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    g = np.stack([xs, ys], axis=-1)[None].repeat(n, axis=0)
    return (g + rng.normal(0, 0.05, g.shape)).astype(np.float32)


def models():
    rng = np.random.default_rng(3)
    f32 = np.float32
    out = {}
    x = rng.standard_normal((1, 64, 128, 128)).astype(f32)
    for mode in ("bilinear", "nearest"):
        out[f"gs_{mode}"] = one_node(f"gs_{mode}", "GridSample", 16,
                                     [("x", x), ("grid", identity_grid(1, 128, 128, rng))],
                                     [("y", 4)], mode=mode)
    xc = rng.standard_normal((1, 32, 96, 96)).astype(f32)
    out["gs_bicubic"] = one_node("gs_bicubic", "GridSample", 16,
                                 [("x", xc), ("grid", identity_grid(1, 96, 96, rng))],
                                 [("y", 4)], mode="bicubic")
    # DCNv2 3x3, 128 -> 128 channels at 64x64 (a detector's neck at stride 8 of a 512 image).
    c, h, w = 128, 64, 64
    xd = rng.standard_normal((1, c, h, w)).astype(f32)
    wd = (rng.standard_normal((c, c, 3, 3)) * (2.0 / (c * 9)) ** 0.5).astype(f32)
    off = rng.normal(0, 2, (1, 18, h, w)).astype(f32)
    mask = (1 / (1 + np.exp(-rng.standard_normal((1, 9, h, w))))).astype(f32)
    bias = rng.standard_normal(c).astype(f32)
    out["deform_dcn"] = one_node("deform_dcn", "DeformConv", 19,
                                 [("x", xd), ("w", wd), ("offset", off), ("b", bias),
                                  ("mask", mask)],
                                 [("y", 4)], weights=("w", "b"), kernel_shape=[3, 3],
                                 pads=[1, 1, 1, 1])
    # Col2Im: 3x3 patches of 64 channels over a 64x64 image, stride 1, pad 1 (nn.Fold).
    cols = rng.standard_normal((1, 64 * 9, 64 * 64)).astype(f32)
    out["col2im"] = one_node("col2im", "Col2Im", 18,
                             [("cols", cols), ("image_shape", np.array([64, 64], np.int64)),
                              ("block_shape", np.array([3, 3], np.int64))],
                             [("y", 4)], weights=("image_shape", "block_shape"), pads=[1, 1, 1, 1])
    theta = (np.eye(2, 3)[None] + rng.normal(0, 0.1, (1, 2, 3))).astype(f32)
    out["affine_grid"] = one_node("affine_grid", "AffineGrid", 20,
                                  [("theta", theta),
                                   ("size", np.array([1, 3, 448, 448], np.int64))],
                                  [("grid", 4)], weights=("size",), align_corners=0)
    # Resize: torchvision's Resize(antialias=True) of a 720p frame to 224 (opset 18), a
    # segmentation head's x4 upsample with align_corners (PyTorch's F.interpolate(...,
    # align_corners=True)), and a cubic x2 of a feature map.
    frame = rng.standard_normal((1, 3, 720, 1280)).astype(f32)
    for mode in ("linear", "cubic"):
        out[f"resize_aa_{mode}"] = one_node(
            f"resize_aa_{mode}", "Resize", 18,
            [("x", frame), ("roi", np.zeros(0, f32)), ("scales", np.zeros(0, f32)),
             ("sizes", np.array([1, 3, 224, 398], np.int64))],
            [("y", 4)], weights=("roi", "scales", "sizes"), mode=mode, antialias=1)
    seg = rng.standard_normal((1, 21, 128, 128)).astype(f32)
    out["resize_seg"] = one_node(
        "resize_seg", "Resize", 13,
        [("x", seg), ("roi", np.zeros(0, f32)), ("scales", np.zeros(0, f32)),
         ("sizes", np.array([1, 21, 512, 512], np.int64))],
        [("y", 4)], weights=("roi", "scales", "sizes"), mode="linear",
        coordinate_transformation_mode="align_corners")
    feat = rng.standard_normal((1, 32, 128, 128)).astype(f32)
    out["resize_cubic_x2"] = one_node(
        "resize_cubic_x2", "Resize", 13,
        [("x", feat), ("roi", np.zeros(0, f32)), ("scales", np.array([1, 1, 2, 2], f32))],
        [("y", 4)], weights=("roi", "scales"), mode="cubic")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".work", "spatial"))
    parser.add_argument("--args", metavar="NAME",
                        help="print only NAME's bench/compare options (writing its files)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, (m, inputs) in models().items():
        if args.args and name != args.args:
            continue
        path = os.path.join(args.out_dir, name + ".onnx")
        onnx.save(m, path)
        opts = [f"--model-file {name}={path}"]
        for n, a in inputs:
            npy = os.path.join(args.out_dir, f"{name}.{n}.npy")
            np.save(npy, a)
            opts.append(f"--input {name}:{n}={npy}")
        print(" ".join(opts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
