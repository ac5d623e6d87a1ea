"""Arguments that crashed, hung or raised an undocumented class before the Python API fuzzer
(tests/fuzz/python_args_fuzz.py) found them: each now works or raises kiln.Error (a subclass),
TypeError, ValueError or MemoryError. The ones that crashed the process run in a child process, so
a regression fails its test instead of ending the run."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln


def _child(code, timeout=120):
    """Runs `code` in a fresh interpreter (the same kiln); returns (exit code, output)."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, env=dict(os.environ))
    return r.returncode, r.stdout + r.stderr


def _add_model(dtype="float32", shape=("N", 3)):
    """Add(A, B) -> C and Identity(B) -> D, built with onnx.helper."""
    pytest.importorskip("onnx")
    from onnx import helper
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    shape = None if shape is None else list(shape)
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Add", ["A", "B"], ["C"]),
                           helper.make_node("Identity", ["B"], ["D"])], "add",
                          [vi("A", t, shape), vi("B", t, shape)],
                          [vi("C", t, None), vi("D", t, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


def test_numpy_datetime_scalars_are_refused_not_a_segfault(demo_model):
    # numpy's datetime64/timedelta64 scalars export a buffer without strides, which nanobind 2.9
    # dereferenced.
    rc, out = _child(f"""
        import numpy as np, kiln
        s = kiln.Session({demo_model!r})
        for v in (np.timedelta64(5, "ms"), np.datetime64(1, "s")):
            try:
                s.run({{"input": v}})
            except kiln.InvalidArgument as e:
                assert "float32" in str(e), e
            try:
                s.run_into({{"input": np.zeros((1, 1, 28, 28), np.float32)}}, {{"logits": v}})
            except kiln.InvalidArgument as e:
                assert "writable" in str(e), e
        print("refused")
    """)
    assert rc == 0 and "refused" in out, out


def test_quantize_checks_the_calibration_arrays(demo_model, tmp_path):
    # A scalar, or inputs with different sample counts, were read past their ends (a segfault).
    rc, out = _child(f"""
        import numpy as np, kiln
        for cal, words in (({{"input": np.float32(1)}}, "scalar"),
                           ({{"input": np.zeros((0, 1, 28, 28), np.float32)}}, "no samples")):
            try:
                kiln.quantize({demo_model!r}, {str(tmp_path / "q.onnx")!r}, cal, batch=1)
                raise SystemExit("no error for " + words)
            except kiln.InvalidArgument as e:
                assert words in str(e), e
        print("checked")
    """)
    assert rc == 0 and "checked" in out, out
    with pytest.raises(kiln.InvalidArgument, match="dict"):
        kiln.quantize(demo_model, str(tmp_path / "q.onnx"), [("input", np.zeros(1))])


def test_quantize_refuses_different_sample_counts(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "W")
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["M"]),
                           helper.make_node("Add", ["M", "B"], ["C"])], "mm",
                          [vi("A", TensorProto.FLOAT, ["N", 4]),
                           vi("B", TensorProto.FLOAT, ["N", 3])],
                          [vi("C", TensorProto.FLOAT, ["N", 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    path = tmp_path / "mm.onnx"
    onnx.save(m, str(path))
    rc, out = _child(f"""
        import numpy as np, kiln
        try:
            kiln.quantize({str(path)!r}, {str(tmp_path / "q.onnx")!r},
                          {{"A": np.ones((400000, 4), np.float32),
                            "B": np.ones((1, 3), np.float32)}},
                          batch=1)
        except kiln.InvalidArgument as e:
            assert "'A' has 400000, 'B' has 1" in str(e), e
            print("refused")
    """)
    assert rc == 0 and "refused" in out, out


def test_top_k_of_no_classes_returns_at_once():
    # 2**40 rows of no classes (no memory) looped over every row.
    rc, out = _child("""
        import numpy as np, kiln
        idx, prob = kiln.top_k(np.empty((2**40, 0), np.float32), 3)
        assert idx.shape == (2**40, 0) and prob.shape == (2**40, 0)
        print("done")
    """, timeout=60)
    assert rc == 0 and "done" in out, out


def test_scalar_feeds_keep_rank_zero():
    # np.ascontiguousarray made the converted copy of a 0-d feed 1-d.
    s = kiln.Session(_add_model("float16", ()))
    out = s.run({"A": np.array(1.5, ">f2"), "B": 2.0})
    assert out["C"].shape == () and out["D"].shape == () and float(out["C"]) == 3.5


def test_names_and_strings_that_are_not_utf8():
    s = kiln.Session(_add_model())
    a = np.ones((2, 3), np.float32)
    for bad in ("\ud800", "\udc80"):  # a lone surrogate; an escaped byte (no such input)
        with pytest.raises(kiln.InvalidArgument):
            s.run({"A": a, "B": a, bad: a})
        with pytest.raises(kiln.InvalidArgument):
            s.run_into({"A": a, "B": a}, {bad: np.zeros((2, 3), np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="output names must be str"):
        s.run_into({"A": a, "B": a}, {1: np.zeros((2, 3), np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="list of ints"):
        s.prepare({"A": [1, "x"], "B": [1, 3]})
    with pytest.raises(kiln.InvalidArgument, match="input name"):
        s.prepare({1: [1, 3]})
    # A model whose output name is the byte 0xff: its key is os.fsdecode's escape of it.
    named = _add_model().replace(b"\x01D", b"\x01\xff")
    out = kiln.Session(named).run({"A": a, "B": a})
    assert sorted(out) == ["C", "\udcff"]


def test_string_bytes_round_trip_as_surrogate_escapes():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("StringConcat", ["x", "y"], ["z"])], "s",
                          [vi("x", TensorProto.STRING, [None]),
                           vi("y", TensorProto.STRING, [None])],
                          [vi("z", TensorProto.STRING, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    s = kiln.Session(m.SerializeToString())
    z = s.run({"x": np.array([b"a\xff"], object), "y": np.array(["\u00e9"])})["z"]
    assert z.tolist() == ["a\udcff\u00e9"]  # the byte that is not UTF-8, escaped
    z2 = s.run({"x": z, "y": np.array(["!"])})["z"]  # and fed back, the same bytes
    assert z2[0].encode("utf-8", "surrogateescape") == b"a\xff\xc3\xa9!"
    with pytest.raises(kiln.InvalidArgument, match="UTF-8"):
        s.run({"x": np.array(["\ud800"]), "y": np.array(["a"])})


def test_numpy_conversion_errors_are_invalid_argument():
    s = kiln.Session(_add_model())
    a = np.ones((2, 3), np.float32)

    class Bad:
        def __array__(self, dtype=None):
            raise RuntimeError("no array here")

    for v, words in ((Bad(), "no array here"), ([[1.0, 2.0], [3.0]], "numpy cannot make"),
                     ((np.ones(2), object()), "numpy cannot make")):
        with pytest.raises(kiln.InvalidArgument, match=words):
            s.run({"A": v, "B": a})
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float64), (2**40, 3), (0, 0))
    with pytest.raises(MemoryError):  # the same-kind copy of 24 TiB
        s.run({"A": huge, "B": a})
    with pytest.raises(kiln.InvalidArgument, match="scores"):
        kiln.top_k([[2**1100, 1.0]], 1)  # no float holds it (numpy's OverflowError)
    with pytest.raises(kiln.InvalidArgument, match="image 0"):
        kiln.ImageDecoder("fashion-mnist", [1, 1, 28, 28]).transform([[[2**70]]])


def test_model_paths(tmp_path, demo_model):
    with pytest.raises(kiln.InvalidArgument, match="NUL"):
        kiln.Session(demo_model + "\0ignored")  # would have opened demo_model
    with pytest.raises(kiln.InvalidArgument, match="empty"):
        kiln.Session("")
    odd = os.path.join(os.fsencode(str(tmp_path)), b"model-\xff.onnx")
    with open(demo_model, "rb") as f, open(odd, "wb") as g:
        g.write(f.read())
    s = kiln.Session(os.fsdecode(odd))  # a name that is not UTF-8, as os.listdir gives it
    assert s.inputs[0].name == "input"


def test_bench_counts_must_be_positive(demo_model):
    s = kiln.Session(demo_model)
    for kw in ({"iterations": 0}, {"iterations": -1}, {"warmup": -1}, {"iterations": 2.5}):
        with pytest.raises(kiln.InvalidArgument):
            s.bench(**kw)
