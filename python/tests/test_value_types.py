"""Strings, sequences and optionals through kiln.Session: str arrays in and numpy object arrays of
str out, lists for sequences, None for an empty optional (as ONNX Runtime returns them), checked
against ONNX Runtime where the venv has it."""
import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _model(nodes, inputs, outputs, opset=20):
    g = helper.make_graph(nodes, "values", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def _seq(name, elem=TensorProto.FLOAT):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def test_sequence_in_and_out():
    m = _model([helper.make_node("SequenceInsert", ["s", "t"], ["s2"]),
                helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0),
                helper.make_node("SequenceLength", ["s2"], ["n"])],
               [_seq("s"), helper.make_tensor_value_info("t", TensorProto.FLOAT, [None])],
               [_seq("s2"), helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
                helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    s = kiln.Session(m)
    a, b = np.arange(3, dtype=np.float32), np.array([7.0], np.float32)
    out = s.run({"s": [a, a * 2], "t": b})
    assert isinstance(out["s2"], list) and len(out["s2"]) == 3
    np.testing.assert_array_equal(out["s2"][2], b)
    np.testing.assert_array_equal(out["c"], np.concatenate([a, a * 2, b]))
    assert int(out["n"]) == 3
    # An empty sequence, and a tuple instead of a list.
    out = s.run({"s": (), "t": b})
    np.testing.assert_array_equal(out["c"], b)
    with pytest.raises(kiln.InvalidArgument, match="give a list of arrays"):
        s.run({"s": a, "t": b})


def test_strings_in_and_out(ort):
    m = _model([helper.make_node("StringConcat", ["x", "y"], ["z"]),
                helper.make_node("RegexFullMatch", ["z"], ["ok"], pattern=r"[a-z]+ly")],
               [helper.make_tensor_value_info("x", TensorProto.STRING, [None]),
                helper.make_tensor_value_info("y", TensorProto.STRING, [None])],
               [helper.make_tensor_value_info("z", TensorProto.STRING, [None]),
                helper.make_tensor_value_info("ok", TensorProto.BOOL, [None])])
    x = np.array(["kiln", "quick", "naïve"])
    y = np.array(["ly", "ly", "té"], dtype=object)
    got = kiln.Session(m).run({"x": x, "y": y})
    want = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None,
                                                                            {"x": x, "y": y})
    assert got["z"].dtype == object and list(got["z"]) == list(want[0])
    np.testing.assert_array_equal(got["ok"], want[1])
    with pytest.raises(kiln.InvalidArgument, match="array of str"):
        kiln.Session(m).run({"x": np.zeros(3, np.float32), "y": y})


def test_optional_none_and_value():
    opt = helper.make_tensor_type_proto(TensorProto.FLOAT, [None])
    m = _model([helper.make_node("OptionalHasElement", ["o"], ["has"])],
               [helper.make_value_info("o", helper.make_optional_type_proto(opt))],
               [helper.make_tensor_value_info("has", TensorProto.BOOL, [])])
    s = kiln.Session(m)
    assert bool(s.run({"o": None})["has"]) is False
    assert bool(s.run({"o": np.ones(2, np.float32)})["has"]) is True
    m = _model([helper.make_node("Identity", ["o"], ["p"])],
               [helper.make_value_info("o", helper.make_optional_type_proto(opt))],
               [helper.make_value_info("p", helper.make_optional_type_proto(opt))])
    s = kiln.Session(m)
    assert s.run({"o": None})["p"] is None
    np.testing.assert_array_equal(s.run({"o": np.ones(2, np.float32)})["p"], np.ones(2))
