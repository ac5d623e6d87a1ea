"""kiln.ImageDecoder and kiln.top_k: the image job's decoding and classification from Python.

The decoders' pixels are checked against PIL and torchvision in tests/data (C++); here: every
bytes-like form and the decoded-array path give the same floats, bad images become error texts
(never exceptions), threads do not change results, and decode + Session + top_k reproduce
kiln.ImageJob's records on the same files."""
import io
import json
import os

import numpy as np
import pytest

import kiln

PIL = pytest.importorskip("PIL.Image")


def _png(arr):
    buf = io.BytesIO()
    PIL.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _jpeg(arr, quality=90):
    buf = io.BytesIO()
    PIL.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


@pytest.fixture(scope="module")
def photos():
    rng = np.random.default_rng(3)
    out = []
    for i in range(7):
        h, w = 40 + 13 * i, 64 + 9 * i
        y, x = np.mgrid[0:h, 0:w]
        arr = np.stack([(x * 3 + i) % 256, (y * 5) % 256, ((x + y) * 2) % 256], -1)
        arr = (arr + rng.normal(0, 10, arr.shape)).clip(0, 255).astype(np.uint8)
        out.append(arr)
    return out


def test_bytes_forms_and_arrays_agree(photos):
    d = kiln.ImageDecoder("torchvision-imagenet", input=[None, 3, 224, 224])
    assert d.recipe == "torchvision-imagenet" and d.sample_shape == [3, 224, 224]
    blob = _png(photos[2])
    forms = [blob, bytearray(blob), memoryview(blob), np.frombuffer(blob, np.uint8)]
    x, err = d.decode(forms)
    assert x.shape == (4, 3, 224, 224) and x.dtype == np.float32 and err == [""] * 4
    for k in range(1, 4):
        np.testing.assert_array_equal(x[k], x[0])
    # A PNG is lossless: the pixels PIL decodes, transformed, are the same floats.
    y, err = d.transform([photos[2]])
    assert err == [""]
    np.testing.assert_array_equal(y[0], x[0])
    assert 0.5 < float(np.abs(x[0]).mean()) < 2.0  # normalized ImageNet-style values


def test_bad_images_are_errors_not_exceptions(photos):
    d = kiln.ImageDecoder("", input=[1, 3, 224, 224], threads=2)
    good = _jpeg(photos[0])
    x, err = d.decode([good, b"", b"not an image", good[: len(good) // 3]])
    assert err[0] == ""
    assert all(e for e in err[1:]), err
    assert "InvalidArgument" in err[2]
    assert not np.any(x[1:]), "a failed image's slice must be zeros"
    assert np.any(x[0])
    y, err = d.transform([photos[0], np.zeros((5, 5, 4), np.uint8)])
    assert err[0] == "" and "got 5x5x4" in err[1]


def test_threads_do_not_change_results(photos):
    blobs = [_jpeg(p, 70 + 3 * i) for i, p in enumerate(photos)] * 3
    one = kiln.ImageDecoder("", input=[None, 3, 224, 224], threads=1)
    three = kiln.ImageDecoder("", input=[None, 3, 224, 224], threads=3)
    assert three.threads == 3
    np.testing.assert_array_equal(one.decode(blobs)[0], three.decode(blobs)[0])


def test_recipe_must_fit_the_input():
    with pytest.raises(kiln.InvalidArgument, match="makes images of"):
        kiln.ImageDecoder("fashion-mnist", input=[None, 3, 224, 224])
    with pytest.raises(kiln.InvalidArgument, match="not a fixed-size RGB image"):
        kiln.ImageDecoder("", input=[None, 3, None, None])
    with pytest.raises(kiln.InvalidArgument):
        kiln.ImageDecoder("no-such-preset", input=[None, 3, 224, 224])


def test_top_k():
    logits = np.array([[1.0, 3.0, 2.0, 3.0], [0.1, 0.2, 0.3, 0.4]], np.float32)
    idx, p = kiln.top_k(logits, 3)
    assert idx.tolist() == [[1, 3, 2], [3, 2, 1]]  # ties go to the lower index
    e = np.exp(logits[0] - logits[0].max())
    np.testing.assert_allclose(p[0], (e / e.sum())[[1, 3, 2]], rtol=1e-6)
    # A row that already is a distribution is kept as is (no second softmax).
    np.testing.assert_allclose(p[1], [0.4, 0.3, 0.2], rtol=1e-6)
    idx, p = kiln.top_k(logits, 10)
    assert idx.shape == (2, 4)
    with pytest.raises(kiln.InvalidArgument):
        kiln.top_k(logits, 0)


def test_decode_run_top_k_equals_image_job(tmp_path, demo_model):
    rng = np.random.default_rng(5)
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(12):
        arr = (rng.random((28 + i, 30 + 2 * i)) * 255).astype(np.uint8)
        (folder / f"g{i:02d}.png").write_bytes(_png(arr))
    (folder / "zz_bad.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    s = kiln.Session(demo_model, threads=1)
    out = tmp_path / "records.jsonl"
    kiln.ImageJob(s, str(folder), str(out), recipe="fashion-mnist", batch=5).run()
    want = {os.path.basename(r["path"]): r for r in map(json.loads, out.read_text().splitlines())}
    names = sorted(os.listdir(folder))
    d = kiln.ImageDecoder("fashion-mnist", session=s)
    x, err = d.decode([(folder / n).read_bytes() for n in names])
    assert [bool(e) for e in err] == ["error" in want[n] for n in names]
    ok = [i for i, e in enumerate(err) if not e]
    idx, p = kiln.top_k(s.run({"input": x[ok]})["logits"], 5)
    for row, i in enumerate(ok):
        assert idx[row].tolist() == want[names[i]]["top_k"]
        np.testing.assert_allclose(p[row], want[names[i]]["scores"], rtol=1e-5, atol=1e-6)


def test_ray_predictor_without_ray(tmp_path, demo_model):
    """kiln.ray.Predictor needs no Ray to construct or call (Ray imports it in each actor)."""
    import kiln.ray as kray
    rng = np.random.default_rng(9)
    blobs = [_png((rng.random((30, 30)) * 255).astype(np.uint8)) for _ in range(5)] + [b"x"]
    paths = [f"p{i}.png" for i in range(6)]
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"class{c}\n" for c in range(10)))
    p = kray.Predictor(demo_model, recipe="fashion-mnist", labels=str(labels), top_k=3,
                       threads=1)
    rec = p({"bytes": np.array(blobs, dtype=object), "path": np.array(paths)})
    assert list(rec["status"]) == ["ok"] * 5 + ["error"]
    assert rec["error"][5] and not any(rec["error"][:5])
    s = kiln.Session(demo_model, threads=1)
    x, _ = kiln.ImageDecoder("fashion-mnist", session=s).decode(blobs[:5])
    idx, sc = kiln.top_k(s.run({"input": x})["logits"], 3)
    assert [list(t) for t in rec["top_k"][:5]] == idx.tolist()
    assert [list(lb) for lb in rec["labels"][:5]] == [[f"class{c}" for c in t] for t in idx]
    assert list(rec["top_k"][5]) == [] and list(rec["labels"][5]) == []
    lines = [json.loads(line) for line in kray._jsonl(p.predict(blobs, paths)).decode().splitlines()]
    assert lines[0]["top_k"] == idx[0].tolist() and lines[5] == {"path": "p5.png",
                                                                 "error": rec["error"][5]}
    with pytest.raises(kiln.InvalidArgument):
        kray.Predictor(demo_model, recipe="fashion-mnist", top_k=0)
    # A path that is not UTF-8 is written as kiln's own records write it (src/data/records.cc).
    odd = os.fsdecode(b"a\xff.png")
    line = json.loads(kray._jsonl({"path": [odd], "status": ["error"], "error": ["bad"]}))
    assert line == {"path": "a\ufffd.png", "path_hex": "61ff2e706e67", "error": "bad"}


def test_ray_predictor_raw_outputs(tmp_path):
    """A model whose first output is not [N, classes]: each image's slice of every output."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["act"]),
         helper.make_node("ReduceMean", ["input"], ["mean"], axes=[2, 3], keepdims=0)],
        "raw", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("act", TensorProto.FLOAT, ["N", 3, 8, 8]),
         helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["N", 3])])
    path = tmp_path / "raw.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    import kiln.ray as kray
    p = kray.Predictor(str(path), recipe="scale01", threads=1)
    assert not p.classifier
    rng = np.random.default_rng(2)
    arrays = [(rng.random((8, 8, 3)) * 255).astype(np.uint8) for _ in range(3)]
    rec = p.predict(arrays + [np.zeros((8, 8, 4), np.uint8)])
    assert rec["status"] == ["ok"] * 3 + ["error"]
    for i, a in enumerate(arrays):
        want = a.transpose(2, 0, 1).astype(np.float32) / 255
        np.testing.assert_allclose(rec["act"][i], want, atol=1e-6)
        np.testing.assert_allclose(rec["mean"][i], want.mean(axis=(1, 2)), atol=1e-6)
    assert rec["act"][3] is None
