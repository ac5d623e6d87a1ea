"""The five torchvision models (seeded random weights, PyTorch's ONNX exports at opset 17) through
kiln.Session against onnxruntime.InferenceSession on the same file: outputs within rtol 1e-3 /
atol 1e-4. The models are tests/models/make_torchvision_refs.py's, in $KILN_TORCHVISION_DIR (the
torchvision_models test's folder; made there when missing, about a minute, with the same
--calibrate-bn as tests/models/run_torchvision_check.sh: the files are shared, and the reference
logits of that test belong to the calibrated models)."""
import os
import subprocess

import numpy as np
import pytest

import kiln

from conftest import REPO

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]


@pytest.fixture(scope="module")
def zoo():
    d = os.environ.get("KILN_TORCHVISION_DIR")
    if not d:
        pytest.skip("KILN_TORCHVISION_DIR is not set (CTest's python_tests sets it)")
    if not all(os.path.exists(os.path.join(d, f"{m}_op17.onnx")) for m in MODELS):
        r = subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "models",
                                                             "make_torchvision_refs.py"), d,
                            "--models", ",".join(MODELS), "--opsets", "13,17",
                            "--batches", "1,4", "--calibrate-bn"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    return d


@pytest.mark.parametrize("model", MODELS)
def test_torchvision_model_matches_onnx_runtime(zoo, model, ort):
    path = os.path.join(zoo, f"{model}_op17.onnx")
    x = np.load(os.path.join(zoo, f"{model}_b1_input.npy"))
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    got = kiln.Session(path).run({"input": x})["logits"]
    assert got.shape == want.shape == (1, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
