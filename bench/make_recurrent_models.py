#!/usr/bin/env python3
"""Recurrent layers at the size of a CRNN text recognizer's head, for bench/compare.

    bench/.venv/bin/python bench/make_recurrent_models.py [OUT_DIR]

Writes OUT_DIR/{lstm,gru,rnn}.onnx (default bench/.work/recurrent) and prints the bench/compare
options that run them:

    bench/compare $(bench/.venv/bin/python bench/make_recurrent_models.py) \\
        --batches 1 --rounds 5 --runtimes kiln,ort,ov-f32

Each model is a bidirectional layer over 40 steps of 512 features with hidden size 256 (the
shape of CRNN's sequence model over a 320-pixel-wide line), seeded N(0, 0.05) weights and
biases, opset 14, layout 0. The input is batch-first, [N, 40, 512], and a Transpose feeds the
layer [40, N, 512], so bench/compare's --batches sets N (ONNX Runtime does not run the
batch-first layout=1). GRU uses linear_before_reset=1, PyTorch's form; RNN uses Tanh.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEQ, FEATURES, HIDDEN = 40, 512, 256
GATES = {"lstm": ("LSTM", 4), "gru": ("GRU", 3), "rnn": ("RNN", 1)}


def make(name, out_dir, rng):
    op, gates = GATES[name]
    weights = {
        "w": rng.standard_normal((2, gates * HIDDEN, FEATURES)),
        "r": rng.standard_normal((2, gates * HIDDEN, HIDDEN)),
        "b": rng.standard_normal((2, 2 * gates * HIDDEN)),
    }
    attrs = dict(direction="bidirectional", hidden_size=HIDDEN)
    if op == "GRU":
        attrs["linear_before_reset"] = 1
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             helper.make_node(op, ["xt", "w", "r", "b"], ["y"], **attrs)]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", SEQ, FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SEQ, 2, "N", HIDDEN])],
        [numpy_helper.from_array((a * 0.05).astype(np.float32), n) for n, a in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(model, path)
    return path


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), ".work", "recurrent")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    print(" ".join(f"--model-file {n}={make(n, out_dir, rng)}" for n in GATES))


if __name__ == "__main__":
    main()
