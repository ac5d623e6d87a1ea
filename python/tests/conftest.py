"""Shared fixtures: the repository's models, and ONNX Runtime where the venv has it."""
import os
import subprocess

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.path.join(REPO, "demo", "fashion_mnist_cnn.onnx")
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"]


@pytest.fixture(scope="session")
def demo_model():
    return DEMO


@pytest.fixture(scope="session")
def demo_input():
    rng = np.random.default_rng(0)
    return rng.random((4, 1, 28, 28), dtype=np.float32)


@pytest.fixture(scope="session")
def ort():
    """onnxruntime, or a skip where the venv has none (the numpy-2 venv)."""
    return pytest.importorskip("onnxruntime")


@pytest.fixture(scope="session")
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
