#!/usr/bin/env python3
"""One dynamically quantized Linear layer at ViT-B/16's MLP shape, for each share of wide weights.

    bench/.venv/bin/python bench/make_matmul_integer_models.py [OUT_DIR] [--shares 0,0.5,2,8,20]

Writes OUT_DIR/mmi_<share>.onnx (default bench/.work/models): x [N, 197, 768] float32 ->
DynamicQuantizeLinear -> MatMulInteger with int8 weights [768, 3072] -> Cast -> Mul(x_scale *
w_scale), the form ONNX Runtime's quantize_dynamic writes. The weights are synthetic: <share> %
of them full-range (-127..127), the rest within +-60, which is what decides how kiln runs the
product exactly on a CPU without VNNI (two int8 products, or one on clamped weights plus a sparse
correction: docs/quantization.md). Trained weights under a per-tensor scale have few wide values
(make_dynamic_int8.py prints the share: PP-OCRv4 0.07-0.34 %); random initialisations many.
Compare runtimes on them with bench/compare --model-file mmi_2=... --runtimes kiln,ort.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(share, seed=7):
    rng = np.random.default_rng(seed)
    k, n = 768, 3072
    w = rng.integers(-60, 61, size=(k, n)).astype(np.int8)
    wide = rng.random((k, n)) < share / 100
    w[wide] = rng.integers(-127, 128, size=int(wide.sum())).astype(np.int8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"]),
        helper.make_node("Mul", ["accf", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, f"mmi_{share}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 197, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 197, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "ws")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".work", "models"))
    parser.add_argument("--shares", default="0,0.5,2,8,20")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for share in args.shares.split(","):
        path = os.path.join(args.out_dir, f"mmi_{share}.onnx")
        onnx.save(model(float(share)), path)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
