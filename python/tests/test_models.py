"""The five torchvision models (seeded random weights, PyTorch's ONNX exports at opset 17) through
kiln.Session against onnxruntime.InferenceSession on the same file: outputs within rtol 1e-3 /
atol 1e-4. The models are tests/models/make_torchvision_refs.py's, in $KILN_TORCHVISION_DIR (the
torchvision_models test's folder; made there when missing, about a minute, with the same
--calibrate-bn as tests/models/run_torchvision_check.sh: the files are shared, and the reference
logits of that test belong to the calibrated models)."""
import os

import numpy as np
import pytest

import kiln

from conftest import MODELS


@pytest.mark.parametrize("model", MODELS)
def test_torchvision_model_matches_onnx_runtime(zoo, model, ort):
    path = os.path.join(zoo, f"{model}_op17.onnx")
    x = np.load(os.path.join(zoo, f"{model}_b1_input.npy"))
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    got = kiln.Session(path).run({"input": x})["logits"]
    assert got.shape == want.shape == (1, 1000)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
