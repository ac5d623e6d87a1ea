"""Shared weights, measured: 8 sessions of ResNet-50 in one process cost at most 1.3x one
session's peak resident set (each count in a fresh child process, bench/memory_bench.py's
measurement), and every session after the first finds the weights already loaded. Without
sharing the same 8 cost several copies, so the bound is one sharing has to meet."""
import importlib.util
import os

from conftest import REPO

_spec = importlib.util.spec_from_file_location(
    "memory_bench", os.path.join(REPO, "bench", "memory_bench.py"))
memory_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(memory_bench)


def test_eight_resnet50_sessions_cost_one_copy_of_the_weights(zoo):
    path = os.path.join(zoo, "resnet50_op17.onnx")
    one = memory_bench.measure(path, 1, "kiln")
    eight = memory_bench.measure(path, 8, "kiln")
    assert eight["shared"] == [False] + [True] * 7
    assert one["constant_bytes"] > 90e6  # ResNet-50's weights after folding
    assert eight["peak_mib"] <= 1.3 * one["peak_mib"], (one, eight)


def test_unshared_sessions_each_hold_their_weights(zoo):
    path = os.path.join(zoo, "resnet50_op17.onnx")
    one = memory_bench.measure(path, 1, "unshared")
    three = memory_bench.measure(path, 3, "unshared")
    assert three["shared"] == [False] * 3
    # Two more copies of the weights (and their packed copies): the store is what saves them.
    assert three["growth_mib"] - one["growth_mib"] > 2 * one["constant_bytes"] / 2**20
