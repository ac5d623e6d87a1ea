"""kiln.quantize over the library's whole pipeline (kiln/quantize.h), as `kiln quantize` runs it:
the --calibrate forms (tensor files, NAME=FILE, image folders) beside in-memory arrays, the
calibration cache, compare (per-node errors), max_drop (accuracy control) with labels from a file
or an array, and the progress callback. The CLI, where the build tree has it, writes the same
model from the same data."""
import os
import subprocess

import numpy as np
import pytest

import kiln


def _cli():
    """The build tree's `kiln` CLI (<build>/tools/kiln/kiln beside <build>/python/kiln), or None."""
    path = os.environ.get("KILN_CLI") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))),
        "tools", "kiln", "kiln")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _two_gemms(path):
    """x [N, 3] -> Gemm 'a' (drops the third column: h = x[:, :2]) -> Gemm 'b' (y = [h0 - h1,
    h1 - h0]) -> y. Calibrated on rows whose third column is +-100 and first two +-1, the held-out
    rows [0.1, 0.2, 0] become zeros at 'a''s input (scale 100/127) but not at 'b''s (1/127): with
    'a' int8 the argmax is 0 where float's is 1, with only 'b' int8 it is 1."""
    pytest.importorskip("onnx")
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    wa = numpy_helper.from_array(np.array([[1, 0, 0], [0, 1, 0]], np.float32), "wa")
    wb = numpy_helper.from_array(np.array([[1, -1], [-1, 1]], np.float32), "wb")
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Gemm", ["x", "wa"], ["h"], "a", transB=1),
                           helper.make_node("Gemm", ["h", "wb"], ["y"], "b", transB=1)], "two",
                          [vi("x", TensorProto.FLOAT, ["N", 3])],
                          [vi("y", TensorProto.FLOAT, ["N", 2])], [wa, wb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _two_gemm_rows(scale_first=1.0):
    """2 calibration rows then 6 held-out rows [0.1, 0.2, 0]."""
    cal = [[scale_first, -scale_first, 100], [-scale_first, scale_first, -100]]
    return np.array(cal + [[0.1, 0.2, 0]] * 6, np.float32)


def _argmax_agreement(model_a, model_b, x):
    a = kiln.Session(model_a).run({"input": x})["logits"].argmax(1)
    b = kiln.Session(model_b).run({"input": x})["logits"].argmax(1)
    return 100.0 * float((a == b).mean())


@pytest.fixture(scope="module")
def calib(tmp_path_factory):
    """48 seeded demo-model samples, in memory and as a .npy file."""
    x = np.random.default_rng(7).random((48, 1, 28, 28), dtype=np.float32)
    path = tmp_path_factory.mktemp("calib") / "calib.npy"
    np.save(path, x)
    return x, str(path)


def test_file_and_arrays_give_the_same_model(demo_model, calib, tmp_path):
    x, path = calib
    notes = []
    from_file = kiln.quantize(demo_model, str(tmp_path / "file.onnx"), path, samples=32, batch=8,
                              cache=str(tmp_path / "cache.json"),
                              trt_cache=str(tmp_path / "trt.txt"),
                              progress=lambda kind, text: notes.append((kind, text)))
    assert from_file["samples"] == 32 and not from_file["cache_hit"]
    assert ("note", f"calibration data: 32 samples of '{path}'") in notes
    assert sum(kind == "batch" for kind, _ in notes) == 4 * 3  # 32/8 batches x 3 passes
    assert os.path.getsize(tmp_path / "trt.txt") > 0
    from_arrays = kiln.quantize(demo_model, str(tmp_path / "arrays.onnx"), {"input": x},
                                samples=32, batch=8)
    with open(tmp_path / "file.onnx", "rb") as f, open(tmp_path / "arrays.onnx", "rb") as g:
        assert f.read() == g.read()
    for key in ("method", "samples", "quantized_nodes", "float_nodes", "model_bytes",
                "bias_corrected", "activations"):
        assert from_file[key] == from_arrays[key], key
    acts = from_file["activations"]
    assert acts and all(a["scale"] > 0 for a in acts)
    for a in acts:
        assert a["dtype"] in ("uint8", "int8") and a["min"] <= a["max"]
        assert set(a) >= {"tensor", "dtype", "scale", "zero_point", "min", "max", "threshold",
                          "method"}
    assert from_file["failed_images"] == [] and from_file["seconds"] > 0
    # The same rows in memory hit the cache the file wrote (the same data key).
    hit = kiln.quantize(demo_model, str(tmp_path / "cached.onnx"), {"input": x}, samples=32,
                        batch=8, cache=str(tmp_path / "cache.json"))
    assert hit["cache_hit"]
    assert [a["scale"] for a in hit["activations"]] == [a["scale"] for a in acts]
    # None: every row of the arrays.
    assert kiln.quantize(demo_model, str(tmp_path / "all.onnx"), {"input": x[:20]},
                         batch=0)["samples"] == 20


def test_the_cli_writes_the_same_model(demo_model, calib, tmp_path):
    cli = _cli()
    if cli is None:
        pytest.skip("no kiln CLI in the build tree (KILN_CLI names one)")
    x, path = calib
    r = subprocess.run([cli, "quantize", demo_model, "--calibrate", path, "--out",
                        str(tmp_path / "cli.onnx"), "--samples", "40", "--batch", "16",
                        "--method", "entropy"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s = kiln.quantize(demo_model, str(tmp_path / "py.onnx"), {"input": x}, samples=40, batch=16,
                      method="entropy")
    assert f"quantized {len(s['quantized_nodes'])} nodes to int8 (entropy, 40 samples" in r.stdout
    assert f"({s['model_bytes']} bytes)" in r.stdout
    with open(tmp_path / "cli.onnx", "rb") as f, open(tmp_path / "py.onnx", "rb") as g:
        assert f.read() == g.read()


def test_name_file_list_and_300_samples_by_default(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32) / 7).reshape(4, 3), "W")
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["M"], "mm"),
                           helper.make_node("Add", ["M", "B"], ["C"])], "mm",
                          [vi("A", TensorProto.FLOAT, ["N", 4]),
                           vi("B", TensorProto.FLOAT, ["N", 3])],
                          [vi("C", TensorProto.FLOAT, ["N", 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    model = str(tmp_path / "mm.onnx")
    onnx.save(m, model)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((400, 4), np.float32), rng.standard_normal((400, 3), np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    files = kiln.quantize(model, str(tmp_path / "f.onnx"),
                          [f"B={tmp_path / 'b.npy'}", f"A={tmp_path / 'a.npy'}"],
                          quantize_all=True)
    assert files["samples"] == 300  # the CLI's default for files
    assert files["quantized_nodes"] == ["mm"]
    arrays = kiln.quantize(model, str(tmp_path / "d.onnx"), {"A": a, "B": b}, samples=300,
                           quantize_all=True)
    assert arrays["activations"] == files["activations"]
    with pytest.raises(kiln.InvalidArgument, match="input 'A' is given 2 times"):
        kiln.quantize(model, str(tmp_path / "x.onnx"), [f"A={tmp_path / 'a.npy'}",
                                                         f"A={tmp_path / 'a.npy'}"])
    with pytest.raises(kiln.InvalidArgument, match="input 'B' is missing"):
        kiln.quantize(model, str(tmp_path / "x.onnx"), {"A": a})


def test_compare_gives_each_quantized_node_and_the_output(demo_model, calib, tmp_path):
    x, path = calib
    s = kiln.quantize(demo_model, str(tmp_path / "q.onnx"), path, samples=32, batch=8,
                      compare=True)
    c = s["comparison"]
    assert c["held_out"] is True
    nodes = [layer["node"] for layer in c["layers"]]
    assert nodes == s["quantized_nodes"] + ["(model output)"]
    assert c["layers"][-1]["tensor"] == "logits"
    for layer in c["layers"]:
        assert set(layer) == {"node", "tensor", "cosine", "max_abs", "max_ref"}
        assert 0.5 < layer["cosine"] <= 1.0 + 1e-9 and layer["max_ref"] > 0
        assert layer["max_abs"] >= 0
    assert "accuracy" not in s
    # Every row calibrated: the comparison runs on calibration rows and says so.
    every = kiln.quantize(demo_model, str(tmp_path / "q2.onnx"), {"input": x[:16]}, batch=8,
                          compare=True)
    assert every["comparison"]["held_out"] is False
    assert "comparison" not in kiln.quantize(demo_model, str(tmp_path / "q3.onnx"),
                                             {"input": x[:16]})


def test_max_drop_within_budget_scores_what_the_sessions_say(demo_model, calib, tmp_path):
    x, path = calib
    out = str(tmp_path / "q.onnx")
    reports = []
    s = kiln.quantize(demo_model, out, path, samples=32, batch=8, max_drop=100, eval_samples=10,
                      progress=lambda kind, text: reports.append(text) if kind == "report"
                      else None)
    acc = s["accuracy"]
    assert acc["eval_samples"] == 10 and acc["measure"] == "argmax agreement with float32"
    assert acc["float_score"] == 100.0
    # The int8 score is the argmax agreement of the written model on rows 32..41.
    assert acc["int8_score"] == pytest.approx(_argmax_agreement(demo_model, out, x[32:42]))
    assert acc["drop"] == pytest.approx(100.0 - acc["int8_score"]) and acc["drop"] <= 100
    assert acc["sensitivity"] == [] and acc["kept_float"] == 0
    assert reports and reports[0].startswith("accuracy control on 10 held-out samples")
    with pytest.raises(kiln.InvalidArgument, match="max_drop must be >= 0"):
        kiln.quantize(demo_model, out, path, samples=32, max_drop=-1)
    with pytest.raises(kiln.InvalidArgument, match="all used"):
        kiln.quantize(demo_model, out, {"input": x[:8]}, max_drop=1)


def test_max_drop_keeps_the_sensitive_node_float(tmp_path):
    model = _two_gemms(tmp_path / "two.onnx")
    out = str(tmp_path / "q.onnx")
    reports = []
    s = kiln.quantize(model, out, {"x": _two_gemm_rows()}, samples=2, method="minmax",
                      quantize_all=True, max_drop=0,
                      progress=lambda kind, text: reports.append((kind, text)))
    acc = s["accuracy"]
    assert acc["int8_score"] == 0.0 and acc["float_score"] == 100.0
    assert acc["sensitivity"] == [("a", 100.0), ("b", 0.0)]
    assert acc["kept_float"] == 1 and acc["drop"] == 0.0 <= 0
    assert s["quantized_nodes"] == ["b"] and "a" in s["float_nodes"]
    x = _two_gemm_rows()[2:]
    got = kiln.Session(out).run({"x": x})["y"].argmax(1)
    assert (got == 1).all()  # the model written is the one scored
    assert any(kind == "report" and "1 most sensitive float" in text for kind, text in reports)
    # Calibrated on rows where 'b''s input spans +-100 too: no node alone is harmless.
    rows = _two_gemm_rows(scale_first=100.0)
    with pytest.raises(kiln.InvalidArgument, match=r"--max-drop 0\.0+ not reached: it would keep "
                                                   r"every node float"):
        kiln.quantize(model, out, {"x": rows}, samples=2, method="minmax", quantize_all=True,
                      max_drop=0)


def test_max_drop_scores_top1_against_labels(tmp_path):
    model = _two_gemms(tmp_path / "two.onnx")
    rows = _two_gemm_rows(scale_first=100.0)  # both int8: argmax 0 on every held-out row
    labels = np.array([0, 0, 1, 1, 1, 1, 0, 0], np.int32)  # float's 1 right on 4 of 6
    np.save(tmp_path / "labels.npy", labels)
    common = dict(samples=2, method="minmax", quantize_all=True, max_drop=50)
    from_array = kiln.quantize(model, str(tmp_path / "q.onnx"), {"x": rows}, labels=labels,
                               **common)["accuracy"]
    assert from_array["measure"] == "top-1" and from_array["eval_samples"] == 6
    assert from_array["float_score"] == pytest.approx(400 / 6)
    assert from_array["int8_score"] == pytest.approx(200 / 6)
    assert from_array["drop"] == pytest.approx(200 / 6) and from_array["kept_float"] == 0
    np.save(tmp_path / "rows.npy", rows)
    from_file = kiln.quantize(model, str(tmp_path / "q2.onnx"), str(tmp_path / "rows.npy"),
                              labels=str(tmp_path / "labels.npy"), **common)["accuracy"]
    assert from_file == from_array
    assert kiln.quantize(model, str(tmp_path / "q3.onnx"), {"x": rows}, labels=list(labels),
                         **common)["accuracy"] == from_array
    with pytest.raises(kiln.InvalidArgument, match="one int64/int32 class per sample"):
        kiln.quantize(model, str(tmp_path / "q.onnx"), {"x": rows}, labels=labels[:5], **common)
    with pytest.raises(kiln.InvalidArgument, match="integer classes"):
        kiln.quantize(model, str(tmp_path / "q.onnx"), {"x": rows}, labels=labels * 0.5,
                      **common)


def test_image_folder_reports_failed_images(demo_model, tmp_path):
    png = pytest.importorskip("PIL.Image")
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    rng = np.random.default_rng(4)
    for i in range(6):
        png.fromarray(rng.integers(0, 255, (28, 28), dtype=np.uint8)).save(imgs / f"{i}.png")
    (imgs / "bad.png").write_bytes(b"not a png")
    notes = []
    s = kiln.quantize(demo_model, str(tmp_path / "q.onnx"), imgs, recipe="fashion-mnist",
                      batch=4, progress=lambda kind, text: notes.append(text))
    [failed] = s["failed_images"]  # the image and why
    assert failed.startswith(str(imgs / "bad.png") + ": ") and "decode" in failed
    assert s["samples"] == 6
    assert any("1 of 7 calibration images could not be read" in n for n in notes)


def test_progress_that_raises_stops_the_work_and_propagates(demo_model, calib, tmp_path):
    x, _ = calib

    class Stop(Exception):
        pass

    calls = []

    def progress(kind, text):
        calls.append(kind)
        if kind == "batch":
            raise Stop(text)

    out = tmp_path / "q.onnx"
    with pytest.raises(Stop, match="calibration pass 1/3: 8/32 samples"):
        kiln.quantize(demo_model, str(out), {"input": x}, samples=32, batch=8, progress=progress)
    assert calls.count("batch") == 1  # nothing after the exception, and no model written
    assert not out.exists()
    # A callback that raises in the last report (accuracy control's) still raises.

    def last(kind, text):
        if kind == "report":
            raise KeyError("report")
    with pytest.raises(KeyError):
        kiln.quantize(demo_model, str(out), {"input": x}, samples=32, batch=8, max_drop=100,
                      progress=last)
    # The next call is unaffected.
    assert kiln.quantize(demo_model, str(out), {"input": x}, samples=8,
                         progress=lambda kind, text: None)["samples"] == 8
    with pytest.raises(TypeError):
        kiln.quantize(demo_model, str(out), {"input": x}, progress="not callable")


def test_calibration_given_neither_or_twice_or_wrongly(demo_model, calib, tmp_path):
    x, path = calib
    out = str(tmp_path / "q.onnx")
    for empty in ({}, []):
        with pytest.raises(kiln.InvalidArgument, match="no calibration data"):
            kiln.quantize(demo_model, out, empty)
    # Both forms reach the library only through the native layer (one argument here).
    with pytest.raises(kiln.InvalidArgument, match="calibration data is given twice"):
        kiln._kiln._quantize(demo_model, out, [path], [("input", x)], "percentile", 99.99, 8, [],
                             False, True, False, 0, None, "", "", "", None, "", None, 1000,
                             False, None)
    for bad in (None, 5, [("input", x)], [path, 3]):
        with pytest.raises(kiln.InvalidArgument, match="dict"):
            kiln.quantize(demo_model, out, bad)
    with pytest.raises(kiln.NotFound, match="does not exist"):
        kiln.quantize(demo_model, out, str(tmp_path / "none.npy"))
    with pytest.raises(kiln.InvalidArgument, match="--samples must be >= 1"):
        kiln.quantize(demo_model, out, path, samples=0)
    with pytest.raises(TypeError):
        kiln.quantize(demo_model, out, path, cache=5)
