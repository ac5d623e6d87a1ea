#!/usr/bin/python3
"""Writes the small models cli_test.sh uses into OUTDIR (Debian's python3-onnx)."""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]

# Two inputs, an output whose name needs sanitising.
g = helper.make_graph(
    [helper.make_node("Add", ["a", "b"], ["sum:0/x"], name="add")],
    "two_inputs",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3])],
    [helper.make_tensor_value_info("sum:0/x", TensorProto.FLOAT, ["N", 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{out}/two_inputs.onnx")

# Unsupported nodes, twice (ops kiln does not have: classic-ML preprocessing).
g = helper.make_graph(
    [helper.make_node("Scaler", ["x"], ["nz"], name="nz1", domain="ai.onnx.ml"),
     helper.make_node("Normalizer", ["x"], ["y"], name="det1", domain="ai.onnx.ml")],
    "unsupported",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2]),
     helper.make_tensor_value_info("nz", TensorProto.FLOAT, [2, 2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15),
                                              helper.make_opsetid("ai.onnx.ml", 3)]),
          f"{out}/unsupported.onnx")

# A symbolic dim besides the batch (for `kiln bench` shape errors).
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")],
    "symbolic",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H"])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H"])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{out}/sym.onnx")

# A batched input beside a scalar one and one with a fixed first dim (as Silero VAD's input, sample
# rate and state): --batch sizes only the first.
g = helper.make_graph(
    [helper.make_node("Mul", ["x", "s"], ["m"], name="scale"),
     helper.make_node("ReduceSum", ["st"], ["r"], name="sum", keepdims=0),
     helper.make_node("Add", ["m", "r"], ["y"], name="add")],
    "scalar_inputs",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
     helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
     helper.make_tensor_value_info("st", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{out}/scalar.onnx")
np.save(f"{out}/s.npy", np.array(2, dtype=np.float32))
np.save(f"{out}/st.npy", np.ones((2, 3), dtype=np.float32))

np.save(f"{out}/a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
np.save(f"{out}/b.npy", np.ones((2, 3), dtype=np.float32))
np.save(f"{out}/b_int.npy", np.ones((2, 3), dtype=np.int64))
np.save(f"{out}/b_rank.npy", np.ones((6,), dtype=np.float32))
with open(f"{out}/b.pb", "wb") as f:
    f.write(numpy_helper.from_array(np.full((2, 3), 2, dtype=np.float32), "b").SerializeToString())

# Two image inputs, a convolution on each, their sum, a classifier: multi-input calibration
# (`kiln quantize --calibrate a=FILE --calibrate b=FILE`), with 10 samples each (and 7 for b).
rng = np.random.default_rng(5)
inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32), "wa"),
         numpy_helper.from_array(rng.uniform(-0.5, 0.5, (4, 3, 3, 3)).astype(np.float32), "wb"),
         numpy_helper.from_array(rng.uniform(-0.5, 0.5, (5, 4)).astype(np.float32), "wf")]
g = helper.make_graph(
    [helper.make_node("Conv", ["a", "wa"], ["ca"], name="conv_a", pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
     helper.make_node("Conv", ["b", "wb"], ["cb"], name="conv_b", pads=[1, 1, 1, 1]),
     helper.make_node("Relu", ["cb"], ["rb"], name="relu_b"),
     helper.make_node("Add", ["ra", "rb"], ["s"], name="sum"),
     helper.make_node("GlobalAveragePool", ["s"], ["g"], name="pool"),
     helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
     helper.make_node("Gemm", ["f", "wf"], ["y"], name="fc", transB=1)],
    "two_image_inputs",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3, 8, 8]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], initializer=inits)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{out}/two_convs.onnx")
np.save(f"{out}/ca.npy", rng.standard_normal((10, 3, 8, 8)).astype(np.float32))
np.save(f"{out}/cb.npy", rng.standard_normal((10, 3, 8, 8)).astype(np.float32))
np.save(f"{out}/cb7.npy", rng.standard_normal((7, 3, 8, 8)).astype(np.float32))
