#!/usr/bin/env python3
"""ONNX Runtime's dynamic quantization of a float32 model, as its users run it.

    bench/.venv/bin/python bench/make_dynamic_int8.py MODEL.onnx OUT.onnx [--ops MatMul,Conv]

onnxruntime.quantization.quantize_dynamic with int8 weights (QInt8, per tensor: its defaults
but for the weight type, which on ONNX Runtime 1.32 already defaults to QInt8): every MatMul
with a constant B becomes DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul, every Conv
ConvInteger the same way (--ops chooses which). Weights written as Constant nodes (PaddlePaddle's
exports, e.g. PP-OCRv4) are turned into initializers first, since quantize_dynamic only quantizes
initializers. Prints how many values of the int8 weights exceed 64 in magnitude: on CPUs without
VNNI that decides how kiln runs the integer products exactly (docs/quantization.md).
Needs bench/.venv (bench/compare creates it: onnx, onnxruntime, numpy).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic


def constants_to_initializers(model):
    """Moves Constant nodes holding a tensor into the graph's initializers (the main graph)."""
    kept = []
    for node in model.graph.node:
        value = [a for a in node.attribute if a.name == "value"]
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and value:
            tensor = onnx.numpy_helper.to_array(value[0].t)
            model.graph.initializer.append(numpy_helper.from_array(tensor, node.output[0]))
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return model


def wide_share(path):
    """(weights, share of |w - zero point| > 64) over the MatMulInteger/ConvInteger weights."""
    model = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    total = wide = 0
    for node in model.graph.node:
        if node.op_type not in ("MatMulInteger", "ConvInteger") or node.input[1] not in inits:
            continue
        w = inits[node.input[1]].astype(np.int32)
        if len(node.input) > 3 and node.input[3] in inits:
            zp = inits[node.input[3]].astype(np.int32)
            w = w - (zp if zp.size == 1 else zp.reshape((-1,) + (1,) * (w.ndim - 1))
                     if node.op_type == "ConvInteger" else zp)
        total += w.size
        wide += int((np.abs(w) > 64).sum())
    return total, wide / max(total, 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--ops", default="MatMul,Conv",
                        help="op types to quantize (default MatMul,Conv)")
    args = parser.parse_args()
    model = constants_to_initializers(onnx.load(args.model))
    with tempfile.TemporaryDirectory() as tmp:
        staged = os.path.join(tmp, "staged.onnx")
        onnx.save(model, staged)
        quantize_dynamic(staged, args.out, weight_type=QuantType.QInt8,
                         op_types_to_quantize=args.ops.split(","))
    total, share = wide_share(args.out)
    print(f"{args.out}: {total} int8 weights, {100 * share:.2f} % wider than 64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
