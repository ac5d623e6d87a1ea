#!/usr/bin/env python3
"""Scan-8 (batch axis first, sequence_lens, reversed `directions`) through kiln and ONNX Runtime.

usage: scan8_ort_check.py KILN WORKDIR

The model of ControlFlowTest.Scan8ScansEachSampleForItsSequenceLength
(tests/runtime/control_flow_test.cc): running sums of x's rows per sample, reversed, sample 1
running one step of three. That test asserts fixed values; this check computes them with ONNX
Runtime (the pinned 1.32.0 of tests/pyenv/check_venv.py) and requires kiln's `kiln run` outputs
to equal ORT's exactly (small integers in float32), and the fixed values to be ORT's, so the C++
test's numbers are ORT's, not ours. Exit 0 and "ok: ..." when all match; 1 otherwise; skips
(check_venv.skip: a failure under CI) when the index cannot be reached.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyenv"))
import check_venv  # noqa: E402

# The C++ test's expected values (control_flow_test.cc, Scan8ScansEachSampleForItsSequenceLength).
CPP_SUM = [9, 12, 107, 108]
CPP_PARTIAL = [5, 6, 8, 10, 9, 12, 107, 108, 0, 0, 0, 0]


def model():
    from onnx import TensorProto, helper
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "row"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("acc", f, [2]), helper.make_tensor_value_info("row", f, [2])],
        [helper.make_tensor_value_info("acc_out", f, [2]),
         helper.make_tensor_value_info("scan_out", f, [2])])
    node = helper.make_node("Scan", ["lens", "init", "x"], ["sum", "partial"], body=body,
                            num_scan_inputs=1, directions=[1])
    g = helper.make_graph(
        [node], "scan8",
        [helper.make_tensor_value_info("lens", i64, ["N"]),
         helper.make_tensor_value_info("init", f, ["N", 2]),
         helper.make_tensor_value_info("x", f, ["N", "T", 2])],
        [helper.make_tensor_value_info("sum", f, ["N", 2]),
         helper.make_tensor_value_info("partial", f, ["N", "T", 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)], ir_version=3)


def main():
    kiln, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    check_venv.reexec_in_venv()
    import numpy as np
    import onnx
    import onnxruntime as ort
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "scan8.onnx")
    onnx.save(model(), path)
    feeds = {"lens": np.array([3, 1], np.int64),
             "init": np.array([[0, 0], [100, 100]], np.float32),
             "x": np.arange(1, 13, dtype=np.float32).reshape(2, 3, 2)}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    args = [kiln, "run", path, "--output-dir", os.path.join(work, "out")]
    for name, x in feeds.items():
        np.save(os.path.join(work, name + ".npy"), x)
        args += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print(f"FAIL: kiln run: rc {r.returncode}: {r.stderr[-800:]}")
        return 1
    failures = []
    for name, cpp in (("sum", CPP_SUM), ("partial", CPP_PARTIAL)):
        got = np.load(os.path.join(work, "out", name + ".npy"))
        if got.shape != ref[name].shape or not np.array_equal(got, ref[name]):
            failures.append(f"{name}: kiln {got.tolist()} != ORT {ref[name].tolist()}")
        if ref[name].ravel().tolist() != cpp:
            failures.append(f"{name}: the C++ test's values {cpp} are not ORT's "
                            f"{ref[name].ravel().tolist()}")
    for f in failures:
        print("FAIL " + f)
    if failures:
        return 1
    print(f"ok: Scan-8 outputs equal ONNX Runtime {ort.__version__}'s and the C++ test's values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
