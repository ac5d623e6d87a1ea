"""kiln.Session: loading, declared inputs and outputs, runs against ONNX Runtime, zero-copy
inputs and outputs, preallocated outputs, DLPack, threads, asyncio and the errors of bad input."""
import asyncio
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln


def test_loads_from_path_bytes_and_pathlike(demo_model, demo_input):
    import pathlib
    a = kiln.Session(demo_model, threads=1)
    b = kiln.Session(open(demo_model, "rb").read(), threads=1)
    c = kiln.Session(pathlib.Path(demo_model), threads=1)
    ya = a.run({"input": demo_input})["logits"]
    for s in (b, c):
        np.testing.assert_array_equal(s.run({"input": demo_input})["logits"], ya)


def test_inputs_outputs_and_metadata(demo_model):
    s = kiln.Session(demo_model)
    assert s.inputs == [kiln.TensorInfo("input", np.dtype(np.float32), ["N", 1, 28, 28])]
    assert s.outputs == [kiln.TensorInfo("logits", np.dtype(np.float32), ["N", 10])]
    meta = s.model_metadata
    assert meta.producer_name == "pytorch"
    assert ("", 13) in meta.opset_imports
    assert isinstance(s.metadata, dict)
    assert "input" in repr(s)


def test_matches_onnx_runtime(demo_model, demo_input, ort):
    ref = ort.InferenceSession(demo_model, providers=["CPUExecutionProvider"])
    want = ref.run(None, {"input": demo_input})[0]
    got = kiln.Session(demo_model)({"input": demo_input})["logits"]
    assert got.dtype == np.float32 and got.shape == (4, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_contiguous_inputs_are_read_in_place_others_copied_once(demo_model, demo_input):
    s = kiln.Session(demo_model, threads=1)
    want = s.run({"input": demo_input})["logits"]
    assert s.stats()["inputs_copied"] == 0 and s.stats()["inputs_in_place"] == 1
    s.run({"input": demo_input.astype(np.float64)})             # float64 -> float32: a copy
    wide = np.zeros((4, 1, 28, 56), np.float32)
    wide[..., ::2] = demo_input
    got = s.run({"input": wide[..., ::2]})["logits"]           # strided: a copy
    np.testing.assert_array_equal(got, want)
    st = s.stats()
    assert st["inputs_copied"] == 2 and st["inputs_in_place"] == 1 and st["runs"] == 3


def test_outputs_own_kiln_memory(demo_model, demo_input):
    s = kiln.Session(demo_model)
    first = s.run({"input": demo_input})["logits"]
    keep = first.copy()
    second = s.run({"input": demo_input[::-1].copy()})["logits"]
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, keep)  # a later run did not overwrite it
    assert first.base is not None               # a view over kiln's tensor, not a numpy copy
    del s
    gc.collect()
    np.testing.assert_array_equal(first, keep)  # outlives the session


def test_run_into_preallocated_outputs(demo_model, demo_input):
    s = kiln.Session(demo_model)
    want = s.run({"input": demo_input})["logits"]
    out = np.full((4, 10), np.nan, np.float32)
    s.run_into({"input": demo_input}, {"logits": out})
    np.testing.assert_array_equal(out, want)
    with pytest.raises(kiln.InvalidArgument, match="logits"):
        s.run_into({"input": demo_input}, {"logits": np.zeros((4, 10), np.float64)})
    with pytest.raises(kiln.InvalidArgument, match="shape"):
        s.run_into({"input": demo_input}, {"logits": np.zeros((3, 10), np.float32)})


def test_selected_outputs(demo_model, demo_input):
    s = kiln.Session(demo_model)
    assert list(s.run({"input": demo_input}, ["logits"])) == ["logits"]
    with pytest.raises(kiln.InvalidArgument, match="not an output"):
        s.run({"input": demo_input}, ["nope"])


def test_dlpack_input_from_torch_without_copy(demo_model, demo_input):
    torch = pytest.importorskip("torch")
    s = kiln.Session(demo_model)
    want = s.run({"input": demo_input})["logits"]
    got = s.run({"input": torch.from_numpy(demo_input)})["logits"]
    np.testing.assert_array_equal(got, want)
    assert s.stats()["inputs_copied"] == 0


@pytest.mark.parametrize("feeds,kind,words", [
    ({}, kiln.InvalidArgument, "input"),
    ({"input": np.zeros((1, 28, 28), np.float32)}, kiln.InvalidArgument, "rank"),
    ({"input": np.zeros((1, 1, 28, 28), np.int64)}, kiln.InvalidArgument, "float32"),
    ({"input": {"not": "an array"}}, kiln.InvalidArgument, "array"),
    ({"input": "text"}, kiln.InvalidArgument, "float32"),
    ({"other": np.zeros((1, 1, 28, 28), np.float32)}, kiln.InvalidArgument, "not an input"),
])
def test_bad_feeds_raise_clear_errors(demo_model, feeds, kind, words):
    s = kiln.Session(demo_model)
    with pytest.raises(kind) as e:
        s.run(feeds)
    assert words in str(e.value)
    assert isinstance(e.value, kiln.Error) and isinstance(e.value, ValueError)


def test_feeds_must_be_a_dict(demo_model, demo_input):
    with pytest.raises(kiln.InvalidArgument, match="dict"):
        kiln.Session(demo_model).run([demo_input])


def test_bad_models_raise(tmp_path):
    with pytest.raises(kiln.Error) as e:
        kiln.Session(str(tmp_path / "missing.onnx"))
    assert "missing.onnx" in str(e.value)
    with pytest.raises(kiln.InvalidModel):
        kiln.Session(b"\x08\x07this is not a model")
    with pytest.raises(kiln.InvalidArgument, match="device"):
        kiln.Session(b"", device=3)
    with pytest.raises(kiln.InvalidArgument, match="threads"):
        kiln.Session(b"", threads=0)


def test_cuda_without_a_gpu_is_a_clear_error(demo_model):
    if kiln.doctor().get("cuda", {}).get("execution_available"):
        pytest.skip("a GPU is usable here")
    with pytest.raises(kiln.Unavailable) as e:
        kiln.Session(demo_model, device="cuda")
    assert "cuda" in str(e.value).lower()


def test_import_and_cpu_runs_never_load_cuda(demo_model):
    # In a fresh interpreter: another test here opens the CUDA plugin on purpose.
    code = ("import kiln, numpy as np\n"
            f"kiln.Session({demo_model!r}).run({{'input': np.zeros((1, 1, 28, 28), np.float32)}})\n"
            "maps = open('/proc/self/maps').read()\n"
            "print([n for n in ('libkiln_cuda', 'libcudart', 'libcudnn', 'libcublas') if n in maps])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_threads_share_one_session(demo_model, demo_input):
    s = kiln.Session(demo_model, threads=1)
    want = s.run({"input": demo_input})["logits"]
    errors = []

    def work():
        try:
            for _ in range(20):
                np.testing.assert_array_equal(s.run({"input": demo_input})["logits"], want)
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert s.stats()["runs"] == 81


def test_run_async(demo_model, demo_input):
    s = kiln.Session(demo_model)
    want = s.run({"input": demo_input})["logits"]

    async def main():
        outs = await asyncio.gather(*[s.run_async({"input": demo_input}) for _ in range(4)])
        return [o["logits"] for o in outs]
    for got in asyncio.run(main()):
        np.testing.assert_array_equal(got, want)


def test_prepare_and_plan(demo_model, demo_input):
    s = kiln.Session(demo_model)
    s.prepare({"input": [8, 1, 28, 28]})
    assert s.stats()["plans"] == 1
    assert "Conv" in s.describe_plan({"input": demo_input})
    assert dict(s.optimized_op_counts())


def test_bench_reports_latency(demo_model):
    r = kiln.Session(demo_model).bench(iterations=5, warmup=1)
    assert r["p50_ms"] > 0 and r["batch"] == 1 and r["iterations"] == 5


def test_doctor_describes_the_cpu():
    d = kiln.doctor()
    assert d["cpu"]["physical_cores"] >= 1


def test_trace_writes_a_chrome_trace(tmp_path, demo_model, demo_input):
    import subprocess
    import sys
    from conftest import REPO
    s = kiln.Session(demo_model, threads=1)
    path = tmp_path / "trace.json"
    ms = s.trace({"input": demo_input}, path, runs=3)
    assert len(ms) == 3 and all(m > 0 for m in ms)
    r = subprocess.run([sys.executable, os.path.join(REPO, "tests", "cli", "check_trace.py"),
                        str(path), "3"], capture_output=True, text=True)
    assert r.stdout.strip() == "ok", r.stdout + r.stderr
    with pytest.raises(kiln.InvalidArgument):
        s.trace({"input": demo_input}, path, runs=0)
    with pytest.raises(kiln.InvalidArgument, match="cannot write"):
        s.trace({"input": demo_input}, tmp_path / "no" / "dir" / "t.json", runs=1)
