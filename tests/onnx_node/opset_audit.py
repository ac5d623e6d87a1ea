#!/usr/bin/env python3
"""Every ONNX version of an op inside the opset range kiln claims for it was reviewed.

usage: opset_audit.py KILN

`kiln ops` says, per op, the opsets kiln runs (e.g. "Pad opsets 1-24"). ONNX (the pinned onnx
1.19.1, in the venv of tests/pyenv/check_venv.py) defines each op's versions. Each version that
ONNX introduced after opset 17 (the newest Debian's libonnx knows) inside kiln's claimed range
must appear in REVIEWED below with what kiln does about it;
a new ONNX version that nobody looked at fails the test, so `kiln ops` stays the truth.
Exit 77 (skip; under CI a failure, check_venv.skip) when the package index cannot be reached and no venv is cached.
"""
import os
import subprocess
import sys

REVIEWED = {
    # implemented
    ("Pad", 18): "axes input", ("Pad", 19): "wrap mode",
    ("Split", 18): "num_outputs attribute",
    ("Resize", 18): "axes, keep_aspect_ratio_policy, antialias (linear and cubic)",
    ("Resize", 19): "half_pixel_symmetric",
    **{(f"Reduce{k}", 18): "axes input, noop_with_empty_axes"
       for k in ("L1", "L2", "LogSum", "LogSumExp", "Max", "Mean", "Min", "Prod", "SumSquare")},
    ("ReduceMax", 20): "bool inputs", ("ReduceMin", 20): "bool inputs",
    ("AveragePool", 19): "dilations attribute (reference kernel when not 1)",
    ("Gelu", 20): "new op: approximate none (erf) and tanh",
    ("GroupNormalization", 18): "new op: scale and bias per group",
    ("GroupNormalization", 21): "scale and bias per channel; stash_type 1, others refused",
    ("QuantizeLinear", 19): "float8 outputs with saturate; float16/bf16/int32 x refused",
    ("QuantizeLinear", 21): "output_dtype, int16/uint16, int4/uint4; block_size > 0 refused",
    ("QuantizeLinear", 23): "precision: float32 only, others refused; float4e2m1 outputs",
    ("QuantizeLinear", 24): "float8e8m0 only (refused)",
    ("DequantizeLinear", 19): "float8 inputs; float16 scales in float16 models (lowered to float32)",
    ("DequantizeLinear", 21): "int16/uint16, int4/uint4; block_size > 0 refused",
    ("DequantizeLinear", 23): "output_dtype: float32 only, others refused; float4e2m1 inputs",
    ("DequantizeLinear", 24): "float8e8m0 only (refused)",
    ("GridSample", 20): "N-D inputs, modes renamed linear/cubic (16's bilinear/bicubic kept at 16)",
    ("AffineGrid", 20): "new op: 2-D and 3-D, align_corners",
    ("Col2Im", 18): "new op: N-D, dilations/pads/strides",
    ("DeformConv", 19): "new op: 2-D (1-D/3-D refused with a reason), mask, groups, offset groups",
    ("QLinearMatMul", 21): "float16/bfloat16 scales (refused: float32 only)",
    ("Mish", 18): "new op: x * tanh(softplus(x)), in double",
    ("Swish", 24): "new op: x * sigmoid(alpha * x), alpha attribute",
    ("Attention", 23): "new op: 3-D/4-D, grouped heads, bool/float mask, causal, softcap, "
                       "past/present key and value, qk_matmul_output modes 0-3",
    ("Attention", 24): "nonpad_kv_seqlen input; a mask shorter than the keys padded with -inf",
    ("RMSNormalization", 23): "new op: axis, epsilon, scale broadcast; stash_type 1 and 11",
    ("RotaryEmbedding", 23): "new op: 3-D/4-D, interleaved, rotary_embedding_dim, position_ids",
    ("ScatterElements", 18): "reduction max and min",
    **{(op, 18): "new op: every 8-64-bit integer type, broadcasting"
       for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    ("BitwiseNot", 18): "new op: every 8-64-bit integer type",
    ("TensorScatter", 24): "new op: linear and circular modes, write_indices, any axis but 0",
    ("ImageDecoder", 20): "new op: JPEG, PNG, PNM, BMP; RGB, BGR, Grayscale; TIFF/WebP/JPEG 2000 "
                          "refused",
    ("Cast", 19): "float8 types, saturate", ("CastLike", 19): "float8 types, saturate",
    ("Cast", 21): "int4/uint4", ("CastLike", 21): "int4/uint4",
    ("Cast", 23): "float4e2m1", ("CastLike", 23): "float4e2m1",
    ("Cast", 24): "float8e8m0, round_mode", ("CastLike", 24): "float8e8m0, round_mode",
    ("ScatterND", 18): "reduction max and min",
    ("LpPool", 18): "ceil_mode and dilations attributes",
    ("CenterCropPad", 18): "new op: axes, crop and pad centered",
    ("DFT", 20): "axis as an optional input (default -2) instead of the attribute",
    ("OptionalGetElement", 18): "a tensor or sequence input is returned as it is",
    ("OptionalHasElement", 18): "a tensor or sequence input gives true, an omitted input false",
    ("RegexFullMatch", 20): "new op: RE2 syntax (libre2), full match per element",
    ("StringConcat", 20): "new op: elementwise with broadcasting",
    ("StringSplit", 20): "new op: delimiter or runs of whitespace, maxsplit, counts output",
}
# Versions that only widen the type lists (bfloat16, float8, int4, uint4, float4, string): the
# semantics of the types kiln runs are unchanged, and each op's shape inference refuses the types
# it does not compute (bfloat16 models are lowered to float32 at load).
TYPES_ONLY = {
    "NegativeLogLikelihoodLoss": [22],
    **{op: [22] for op in ("Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
                           "RandomUniform", "RandomUniformLike")},
    "AveragePool": [22],
    "Constant": [19, 21, 23, 24], "ConstantOfShape": [20, 21, 23, 24], "Conv": [22],
    "ConvTranspose": [22], "Dropout": [22], "Elu": [22], "Equal": [19], "Flatten": [21, 23, 24],
    "GlobalAveragePool": [22], "GlobalMaxPool": [22], "HardSigmoid": [22], "HardSwish": [22],
    "Identity": [19, 21, 23, 24], "InstanceNormalization": [22], "IsInf": [20], "IsNaN": [20], "MaxPool": [22],
    "Pad": [21, 23, 24], "Reshape": [19, 21, 23, 24], "Selu": [22], "Shape": [19, 21, 23, 24],
    "Size": [19, 21, 23, 24], "Softplus": [22], "Squeeze": [21, 23, 24], "TopK": [24],
    "Transpose": [21, 23, 24], "Unsqueeze": [21, 23, 24],
    # control flow: the bodies' value types widened (float8, int4, float4, float8e8m0); the body
    # nodes refuse those types at load
    "If": [19, 21, 23, 24], "Loop": [19, 21, 23, 24], "Scan": [19, 21, 23, 24], "LSTM": [22], "GRU": [22], "RNN": [22],
    "RoiAlign": [22], "GridSample": [22], "DeformConv": [22], "MaxRoiPool": [22],
    "SplitToSequence": [24],
    # bfloat16 added to T (checked against onnx.defs: same attributes and inputs)
    **{op: [22] for op in ("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
                           "Acosh", "Atanh", "Softsign", "Round", "Mish", "ThresholdedRelu",
                           "EyeLike", "LpPool", "GlobalLpPool", "LpNormalization", "MaxUnpool",
                           "Det")},
}
def main():
    kiln = sys.argv[1]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
    import check_venv
    check_venv.reexec_in_venv()
    import onnx
    from onnx import defs
    versions = {}
    for s in defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            versions.setdefault(s.name, set()).add(s.since_version)
    out = subprocess.run([kiln, "ops"], capture_output=True, text=True, check=True).stdout
    problems, checked = [], 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] != "opsets" or "-" not in parts[2]:
            continue
        name, (lo, hi) = parts[0], map(int, parts[2].split("-"))
        if name not in versions:
            continue  # kiln's own domain ops (kiln.FusedConv) or ops ONNX dropped
        if hi > defs.onnx_opset_version():
            problems.append(f"{name}: kiln claims opset {hi}, newer than onnx {onnx.__version__} knows")
        for v in sorted(versions[name]):
            if v <= 17 or v < lo or v > hi:
                continue
            checked += 1
            if (name, v) in REVIEWED or v in TYPES_ONLY.get(name, []):
                continue
            problems.append(f"{name}-{v}: ONNX defines this version inside kiln's range {lo}-{hi}, "
                            "and nobody reviewed it (opset_audit.py)")
    for p in problems:
        print("FAIL:", p)
    print(f"opset audit: {checked} ONNX versions after opset 17 inside kiln's ranges, "
          f"{len(problems)} problems (onnx {onnx.__version__}, opset {defs.onnx_opset_version()})")
    sys.exit(1 if problems or checked == 0 else 0)


if __name__ == "__main__":
    main()
