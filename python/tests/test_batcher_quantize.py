"""kiln.Batcher (threads and asyncio), kiln.quantize and kiln.ImageJob."""
import asyncio
import os

import numpy as np
import pytest

import kiln


def test_batcher_merges_concurrent_requests(demo_model, demo_input):
    s = kiln.Session(demo_model, threads=1)
    want = s.run({"input": demo_input})["logits"]
    with kiln.Batcher(s, max_batch=8, max_queue_delay_us=20000) as b:
        futures = [b.submit({"input": demo_input[i % 4:i % 4 + 1]}) for i in range(16)]
        for i, f in enumerate(futures):
            np.testing.assert_allclose(f.result(timeout=60)["logits"][0], want[i % 4],
                                       rtol=1e-5, atol=1e-6)
        st = b.stats()
    assert st["requests"] == 16 and st["batched_samples"] == 16
    assert st["batches"] < 16  # merged


def test_batcher_asyncio(demo_model, demo_input):
    s = kiln.Session(demo_model)
    want = s.run({"input": demo_input})["logits"]
    b = kiln.Batcher(s, max_batch=4, max_queue_delay_us=20000)

    async def main():
        return await asyncio.gather(*[b.infer_async({"input": demo_input[i:i + 1]})
                                      for i in range(4)])
    for i, out in enumerate(asyncio.run(main())):
        np.testing.assert_allclose(out["logits"][0], want[i], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.infer({"input": demo_input[:1]})["logits"][0], want[0],
                               rtol=1e-5, atol=1e-6)
    b.close()
    with pytest.raises(kiln.Unavailable):
        b.infer({"input": demo_input[:1]})


def test_batcher_errors_are_exceptions(demo_model):
    b = kiln.Batcher(kiln.Session(demo_model), max_batch=2)
    with pytest.raises(kiln.InvalidArgument):
        b.submit({"input": np.zeros((3, 1, 28, 28), np.float32)})  # more than max_batch
    with pytest.raises(kiln.InvalidArgument):
        kiln.Batcher(kiln.Session(demo_model), max_batch=0)


def test_quantize_writes_a_model_that_agrees_with_float(demo_model, tmp_path):
    rng = np.random.default_rng(1)
    calib = rng.random((32, 1, 28, 28), dtype=np.float32)
    out = str(tmp_path / "int8.onnx")
    summary = kiln.quantize(demo_model, out, {"input": calib}, batch=8)
    assert os.path.getsize(out) == summary["model_bytes"] > 0
    assert summary["samples"] == 32 and summary["quantized_nodes"]
    x = rng.random((16, 1, 28, 28), dtype=np.float32)
    f = kiln.Session(demo_model).run({"input": x})["logits"]
    q = kiln.Session(out).run({"input": x})["logits"]
    assert (f.argmax(1) == q.argmax(1)).mean() >= 0.9
    with pytest.raises(kiln.InvalidArgument):
        kiln.quantize(demo_model, out, {"input": calib.astype(np.int64)})


def test_image_job_classifies_a_folder(demo_model, tmp_path):
    png = pytest.importorskip("PIL.Image")
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    rng = np.random.default_rng(2)
    for i in range(5):
        png.fromarray(rng.integers(0, 255, (28, 28), dtype=np.uint8)).save(imgs / f"{i}.png")
    (imgs / "bad.png").write_bytes(b"not a png")
    calls = []
    r = kiln.ImageJob(kiln.Session(demo_model), str(imgs), str(tmp_path / "r.jsonl"),
                      recipe="fashion-mnist", batch=2).run(
        progress=lambda done, total, failed, s: calls.append((done, total)))
    assert r["done"] == 6 and r["ok"] == 5 and r["failed"] == 1
    assert calls and calls[-1][0] == 6
    assert len(open(tmp_path / "r.jsonl").read().splitlines()) == 6
    with pytest.raises(kiln.Error):
        kiln.ImageJob(kiln.Session(demo_model), str(tmp_path / "none"),
                      str(tmp_path / "x.jsonl")).run()
