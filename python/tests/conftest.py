"""Shared fixtures: the repository's models, and ONNX Runtime where the venv has it."""
import os

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.path.join(REPO, "demo", "fashion_mnist_cnn.onnx")


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
