"""kiln.ort, the onnxruntime drop-in: its API surface against the real ONNX Runtime (the check
venv's 1.32.0) on the same models (inputs, outputs, types, shapes, metadata, results), providers,
SessionOptions, the ONNX Runtime-named errors with kiln's messages, OrtValue, and install() /
uninstall() (in subprocesses, so this process keeps seeing the real onnxruntime)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.ort as kort
from kiln.ort.capi import onnxruntime_pybind11_state as kstate

from conftest import REPO

DEMOS = ["fashion_mnist_cnn.onnx", "fmnist_resnet.onnx", "fmnist_mobilenetv2.onnx"]
CPU = ["CPUExecutionProvider"]


def demo(name):
    return os.path.join(REPO, "demo", name)


@pytest.fixture(scope="module")
def io_model(tmp_path_factory):
    """A model with inputs of several dtypes and shape forms (symbols, an unnamed dim, none
    declared), six outputs and its own metadata; written by onnx (skips without it)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper as h
    vi = h.make_tensor_value_info
    inputs = [vi("x", T.FLOAT, ["N", 3]), vi("ids", T.INT64, ["batch", None]),
              vi("mask", T.BOOL, [2]), vi("img", T.UINT8, [1, 2, 2]), vi("d", T.INT32, None),
              vi("half", T.FLOAT16, [2])]
    outputs = [vi("y", T.FLOAT, ["N", 3]), vi("ids_out", T.INT64, ["batch", None]),
               vi("not_mask", T.BOOL, [2]), vi("img_f", T.FLOAT, [1, 2, 2]),
               vi("d_out", T.INT32, None), vi("half_out", T.FLOAT16, [2])]
    nodes = [h.make_node("Add", ["x", "x"], ["y"]),
             h.make_node("Identity", ["ids"], ["ids_out"]),
             h.make_node("Not", ["mask"], ["not_mask"]),
             h.make_node("Cast", ["img"], ["img_f"], to=T.FLOAT),
             h.make_node("Identity", ["d"], ["d_out"]),
             h.make_node("Identity", ["half"], ["half_out"])]
    graph = h.make_graph(nodes, "io_graph", inputs, outputs, doc_string="the graph's doc")
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="kiln-test",
                         doc_string="a model of many dtypes", domain="ai.kiln.test",
                         model_version=5, ir_version=8)
    h.set_model_props(model, {"labels": "a\nb", "author": "kiln"})
    path = tmp_path_factory.mktemp("io") / "io.onnx"
    onnx.save(model, str(path))
    return str(path)


def io_feeds():
    return {"x": np.arange(6, dtype=np.float32).reshape(2, 3),
            "ids": np.array([[1, 2, 3]], np.int64), "mask": np.array([True, False]),
            "img": np.array([[[0, 7], [128, 255]]], np.uint8), "d": np.array([[3, -2]], np.int32),
            "half": np.array([0.5, 2.0], np.float16)}


@pytest.fixture(scope="session")
def maybe_ort():
    """onnxruntime where the venv has it (the check venv), else None (the numpy-2 venv): the tests
    taking it check kiln.ort alone there, and against ONNX Runtime where it is."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


def args(nodes):
    return [(n.name, n.type, n.shape) for n in nodes]


# ---- against ONNX Runtime ----------------------------------------------------------------------

@pytest.mark.parametrize("name", DEMOS)
def test_demo_models_match_onnx_runtime(name, demo_input, ort):
    ref = ort.InferenceSession(demo(name), providers=CPU)
    got = kort.InferenceSession(demo(name), providers=CPU)
    assert args(got.get_inputs()) == args(ref.get_inputs())
    assert args(got.get_outputs()) == args(ref.get_outputs())
    assert str(got.get_inputs()[0]) == str(ref.get_inputs()[0])
    feeds = {ref.get_inputs()[0].name: demo_input}
    want = ref.run(None, feeds)
    for out in (got.run(None, feeds), got.run([ref.get_outputs()[0].name], feeds)):
        assert isinstance(out, list) and len(out) == len(want)
        for a, b in zip(out, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    rm, gm = ref.get_modelmeta(), got.get_modelmeta()
    for field in ("producer_name", "graph_name", "domain", "description", "graph_description",
                  "version", "custom_metadata_map"):
        assert getattr(gm, field) == getattr(rm, field), field


def test_dtypes_shapes_and_metadata_match_onnx_runtime(io_model, ort):
    ref = ort.InferenceSession(io_model, providers=CPU)
    got = kort.InferenceSession(io_model, providers=CPU)
    assert args(got.get_inputs()) == args(ref.get_inputs())
    assert args(got.get_outputs()) == args(ref.get_outputs())
    types = {n.name: n.type for n in got.get_inputs()}
    assert types == {"x": "tensor(float)", "ids": "tensor(int64)", "mask": "tensor(bool)",
                     "img": "tensor(uint8)", "d": "tensor(int32)", "half": "tensor(float16)"}
    rm, gm = ref.get_modelmeta(), got.get_modelmeta()
    assert (gm.producer_name, gm.graph_name, gm.domain, gm.description, gm.graph_description,
            gm.version, gm.custom_metadata_map) == \
        (rm.producer_name, rm.graph_name, rm.domain, rm.description, rm.graph_description,
         rm.version, rm.custom_metadata_map)
    assert gm.version == 5 and gm.custom_metadata_map == {"labels": "a\nb", "author": "kiln"}
    # All outputs in the model's order; a subset in the order asked, duplicates too.
    want = ref.run(None, io_feeds())
    have = got.run(None, io_feeds())
    assert len(have) == len(want) == 6
    for a, b in zip(have, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    names = ["img_f", "y", "img_f"]
    for a, b in zip(got.run(names, io_feeds()), ref.run(names, io_feeds())):
        np.testing.assert_array_equal(a, b)
    assert [a.dtype for a in got.run(("not_mask", "half_out"), io_feeds())] == \
        [np.dtype(bool), np.dtype(np.float16)]
    assert got.run([], io_feeds())[0].shape == (2, 3)  # [] is all outputs, as ORT


def test_ortvalue_round_trip_and_feeds(demo_model, demo_input, maybe_ort):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = kort.OrtValue.ortvalue_from_numpy(a)
    assert v.shape() == [3, 4] and v.data_type() == "tensor(float)"
    assert v.device_name() == "cpu" and v.element_type() is np.float32
    assert v.is_tensor() and not v.is_sparse_tensor() and v.has_value()
    assert np.shares_memory(v.numpy(), a)  # the array is wrapped, not copied
    assert np.asarray(v) is a and np.asarray(v, dtype=np.float64).dtype == np.float64
    types = {np.int64: "tensor(int64)", np.uint8: "tensor(uint8)", np.bool_: "tensor(bool)",
             np.float16: "tensor(float16)", np.float64: "tensor(double)",
             np.int32: "tensor(int32)", np.int8: "tensor(int8)"}
    for dtype, name in types.items():
        assert kort.OrtValue.ortvalue_from_numpy(np.zeros(2, dtype)).data_type() == name
    if maybe_ort:
        r = maybe_ort.OrtValue.ortvalue_from_numpy(a)
        assert (v.shape(), v.data_type(), v.device_name()) == \
            (r.shape(), r.data_type(), r.device_name())
        np.testing.assert_array_equal(v.numpy(), r.numpy())
        for dtype, name in types.items():
            assert maybe_ort.OrtValue.ortvalue_from_numpy(np.zeros(2, dtype)).data_type() == name
    scalar = kort.OrtValue.ortvalue_from_numpy(np.float32(2.5))
    assert scalar.shape() == [] and scalar.numpy() == 2.5
    e = kort.OrtValue.ortvalue_from_shape_and_type([2, 5], np.int64)
    assert e.shape() == [2, 5] and e.data_type() == "tensor(int64)"
    strided = kort.OrtValue.ortvalue_from_numpy(a[:, ::2])
    np.testing.assert_array_equal(strided.numpy(), a[:, ::2])
    # As feeds: read in place (kiln counts no copy), same results as arrays.
    s = kort.InferenceSession(demo_model, providers=CPU)
    want = s.run(None, {"input": demo_input})[0]
    before = s.kiln_session.stats()["inputs_copied"]
    got = s.run(None, {"input": kort.OrtValue.ortvalue_from_numpy(demo_input)})[0]
    np.testing.assert_array_equal(got, want)
    assert s.kiln_session.stats()["inputs_copied"] == before
    outs = s.run_with_ort_values(["logits"], {"input": kort.OrtValue.ortvalue_from_numpy(
        demo_input)})
    assert isinstance(outs[0], kort.OrtValue)
    np.testing.assert_array_equal(outs[0].numpy(), want)
    with pytest.raises(kort.NotImplemented, match="CPU only"):
        kort.OrtValue.ortvalue_from_numpy(a, "cuda", 0)


# ---- the session's surface --------------------------------------------------------------------

def test_session_surface(demo_model, demo_input):
    s = kort.InferenceSession(demo_model)
    assert s.get_providers() == CPU
    assert s.get_provider_options() == {"CPUExecutionProvider": {}}
    assert s.get_overridable_initializers() == []
    assert isinstance(s.get_session_options(), kort.SessionOptions)
    assert s.end_profiling() == ""
    s.disable_fallback()
    s.enable_fallback()
    assert isinstance(s.kiln_session, kiln.Session)
    assert s.run(None, {"input": demo_input})[0].shape == (4, 10)
    from_bytes = kort.InferenceSession(open(demo_model, "rb").read(), providers=CPU)
    import pathlib
    from_path = kort.InferenceSession(pathlib.Path(demo_model), providers=CPU)
    for t in (from_bytes, from_path):
        np.testing.assert_array_equal(t.run(None, {"input": demo_input})[0],
                                      s.run(None, {"input": demo_input})[0])
    with pytest.raises(TypeError, match="Unable to load from type"):
        kort.InferenceSession(12)
    with pytest.raises(NotImplementedError, match="IOBinding"):
        s.io_binding()
    ro = kort.RunOptions()
    ro.log_severity_level, ro.logid = 3, "run"
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    assert s.run(["logits"], {"input": demo_input}, ro)[0].shape == (4, 10)
    ro.terminate = True
    with pytest.raises(kort.Fail, match="terminate"):
        s.run(None, {"input": demo_input}, ro)


def test_module_surface(ort):
    from packaging.version import Version
    v = Version(kort.__version__)
    assert v.local and v.local.startswith("kiln") and v >= Version("1.9")
    assert kort.get_version_string() == kort.__version__
    assert kort.__version__.startswith(ort.__version__.split("+")[0])  # the API tested against
    assert kort.get_available_providers()[-1] == "CPUExecutionProvider"
    assert kort.get_device() in ("CPU", "GPU")
    assert (kort.get_device() == "GPU") == ("CUDAExecutionProvider" in
                                            kort.get_available_providers())
    assert set(ort.get_all_providers()) <= set(kort.get_all_providers())
    for e in ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL"):
        assert int(getattr(kort.GraphOptimizationLevel, e)) == \
            int(getattr(ort.GraphOptimizationLevel, e))
    for e in ("ORT_SEQUENTIAL", "ORT_PARALLEL"):
        assert int(getattr(kort.ExecutionMode, e)) == int(getattr(ort.ExecutionMode, e))
    kort.set_default_logger_severity(3)
    kort.set_default_logger_severity(2)
    with pytest.raises(ValueError):
        kort.set_default_logger_severity(9)
    # What applications import from the package and from capi exists.
    for name in ("InferenceSession", "SessionOptions", "RunOptions", "GraphOptimizationLevel",
                 "ExecutionMode", "ExecutionOrder", "OrtValue", "NodeArg", "ModelMetadata",
                 "get_available_providers", "get_all_providers", "get_device",
                 "get_version_string", "get_build_info", "set_default_logger_severity",
                 "set_default_logger_verbosity", "set_seed", "disable_telemetry_events",
                 "enable_telemetry_events"):
        assert hasattr(ort, name) and hasattr(kort, name), name
    from kiln.ort.capi import _pybind_state as kc
    for name in ("get_available_providers", "SessionOptions", "RunOptions", "OrtValue",
                 "InvalidArgument", "Fail", "NodeArg", "get_device", "InferenceSession",
                 "GraphOptimizationLevel", "get_default_session_options"):
        assert hasattr(ort.capi._pybind_state, name) and hasattr(kc, name), name


# ---- providers --------------------------------------------------------------------------------

def test_providers_as_names_tuples_and_options(demo_model, demo_input):
    want = kort.InferenceSession(demo_model).run(None, {"input": demo_input})[0]
    for providers, options in [
            (["CPUExecutionProvider"], None),
            ([("CPUExecutionProvider", {"arena_extend_strategy": "kSameAsRequested"})], None),
            (["CPUExecutionProvider"], [{"arena_extend_strategy": "kSameAsRequested"}]),
            ("CPUExecutionProvider", None), ([], None)]:
        s = kort.InferenceSession(demo_model, providers=providers, provider_options=options)
        assert s.get_providers() == CPU
        np.testing.assert_array_equal(s.run(None, {"input": demo_input})[0], want)
    s.set_providers(["CPUExecutionProvider"])
    assert s.get_providers() == CPU
    np.testing.assert_array_equal(s.run(None, {"input": demo_input})[0], want)
    s.set_providers()
    assert s.get_providers()[-1] == "CPUExecutionProvider"


def test_malformed_providers_fall_back_or_raise_as_onnx_runtime(demo_model, maybe_ort):
    """ORT's ValueError and message; with the fallback on (the default), the CPU instead."""
    for providers, options in [([1], None), (["CPUExecutionProvider"], [{}, {}]),
                               ([("CPUExecutionProvider", {})], [{}]),
                               (["CPUExecutionProvider"], ["x"])]:
        with pytest.raises(ValueError) as got:
            kort.InferenceSession(demo_model, providers=providers, provider_options=options,
                                  enable_fallback=0)
        with pytest.warns(UserWarning, match="EP Error") as w:
            s = kort.InferenceSession(demo_model, providers=providers, provider_options=options)
        assert s.get_providers() == CPU and str(got.value) in str(w[0].message)
        if maybe_ort:
            with pytest.raises(ValueError) as want:
                maybe_ort.InferenceSession(demo_model, providers=providers,
                                           provider_options=options, enable_fallback=0)
            assert str(got.value) == str(want.value)


def test_unknown_provider_warns_and_falls_back_like_onnx_runtime(demo_model, demo_input,
                                                                 maybe_ort):
    message = "Specified provider 'FooExecutionProvider' is not in available provider names."
    if maybe_ort:
        with pytest.warns(UserWarning) as want:
            ref = maybe_ort.InferenceSession(demo_model, providers=["FooExecutionProvider"])
        assert ref.get_providers() == CPU
        assert any(str(w.message).startswith(message) for w in want)
    with pytest.warns(UserWarning) as got:
        s = kort.InferenceSession(demo_model, providers=["FooExecutionProvider"])
    assert s.get_providers() == CPU
    texts = [str(w.message) for w in got]
    assert any(t.startswith(message) and "CPUExecutionProvider" in t for t in texts), texts
    assert any("Unknown Provider Type: FooExecutionProvider" in t for t in texts), texts
    assert s.run(None, {"input": demo_input})[0].shape == (4, 10)
    # Without the fallback ONNX Runtime raises RuntimeError naming the provider; so does kiln.ort.
    with pytest.warns(UserWarning), pytest.raises(RuntimeError) as got_e:
        kort.InferenceSession(demo_model, providers=["FooExecutionProvider"], enable_fallback=0)
    assert str(got_e.value) == "Unknown Provider Type: FooExecutionProvider"
    if maybe_ort:
        with pytest.warns(UserWarning), pytest.raises(RuntimeError) as want_e:
            maybe_ort.InferenceSession(demo_model, providers=["FooExecutionProvider"],
                                       enable_fallback=0)
        assert str(got_e.value) == str(want_e.value)


@pytest.mark.parametrize("providers", [
    ["CUDAExecutionProvider", "CPUExecutionProvider"],
    [("CUDAExecutionProvider", {"device_id": 0, "cudnn_conv_algo_search": "EXHAUSTIVE"})],
    [("TensorrtExecutionProvider", {"device_id": 0}), "CUDAExecutionProvider"],
])
def test_cuda_without_a_gpu_falls_back_to_cpu_with_a_warning(providers, demo_model, demo_input):
    if "CUDAExecutionProvider" in kort.get_available_providers():
        pytest.skip("a GPU is usable here")
    with pytest.warns(UserWarning, match="is not in available provider names") as w:
        s = kort.InferenceSession(demo_model, providers=providers)
    assert "Available providers: 'CPUExecutionProvider'" in str(w[0].message)
    assert s.get_providers() == CPU and s.get_provider_options() == {"CPUExecutionProvider": {}}
    want = kiln.Session(demo_model).run({"input": demo_input})["logits"]
    np.testing.assert_array_equal(s.run(None, {"input": demo_input})[0], want)


def test_cuda_that_does_not_start_falls_back_to_cpu_with_kilns_reason(monkeypatch, demo_model,
                                                                       demo_input):
    """CUDA reported available but kiln's CUDA session failing (here: no GPU): a warning with
    kiln's kiln.Unavailable text, and the CPU."""
    if "CUDAExecutionProvider" in kort.get_available_providers():
        pytest.skip("a GPU is usable here")
    with pytest.raises(kiln.Unavailable) as reason:
        kiln.Session(demo_model, device="cuda:0")
    monkeypatch.setattr(kstate, "_cuda_available", True)
    assert kort.get_available_providers() == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.warns(UserWarning, match="kiln.s CUDA session failed") as w:
        s = kort.InferenceSession(demo_model, providers=[("CUDAExecutionProvider",
                                                          {"device_id": "0"})])
    assert str(reason.value) in str(w[0].message)
    assert s.get_providers() == CPU
    assert s.run(None, {"input": demo_input})[0].shape == (4, 10)


def test_a_device_error_in_a_run_falls_back_to_cpu_once(demo_model, demo_input):
    """As ORT's run() on an EPFail: with fallback on, the session is made again on the CPU and
    the run repeated there, once; with it off, the error is EPFail. (The CUDA session is
    simulated: a run that raises kiln.DeviceError on a session marked as on cuda:0.)"""
    want = kiln.Session(demo_model).run({"input": demo_input})["logits"]

    def failing(feeds, outputs=None):
        raise kiln.DeviceError("DeviceError: cudaLaunchKernel failed (simulated)")
    s = kort.InferenceSession(demo_model, providers=CPU)
    s._device, s._run = "cuda:0", failing
    with pytest.warns(UserWarning, match="cudaLaunchKernel failed"):
        got = s.run(None, {"input": demo_input})[0]
    np.testing.assert_array_equal(got, want)
    assert s.get_providers() == CPU and s._device == "cpu"
    s._device, s._run = "cuda:0", failing  # fallback happens once
    with pytest.raises(kort.EPFail, match="simulated"):
        s.run(None, {"input": demo_input})


# ---- SessionOptions ---------------------------------------------------------------------------

@pytest.fixture
def kiln_session_args(monkeypatch):
    """Records the arguments kiln.ort gives kiln.Session."""
    calls = []
    real = kiln.Session

    def recording(model, **kw):
        calls.append(kw)
        return real(model, **kw)
    monkeypatch.setattr(kiln, "Session", recording)
    return calls


def test_session_options_accepted_and_honoured(demo_model, demo_input, kiln_session_args,
                                                maybe_ort):
    so = kort.SessionOptions()
    if maybe_ort:
        ref = maybe_ort.SessionOptions()
        for attr in ("intra_op_num_threads", "inter_op_num_threads", "log_severity_level",
                     "log_verbosity_level", "logid", "enable_profiling", "enable_cpu_mem_arena",
                     "enable_mem_pattern", "enable_mem_reuse", "optimized_model_filepath",
                     "use_deterministic_compute", "profile_file_prefix",
                     "use_per_session_threads"):
            assert getattr(so, attr) == getattr(ref, attr), attr  # ORT's defaults
    assert so.graph_optimization_level == kort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.execution_mode == kort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.execution_mode = kort.ExecutionMode.ORT_PARALLEL
    so.execution_order = kort.ExecutionOrder.PRIORITY_BASED
    so.graph_optimization_level = kort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.log_verbosity_level = 1
    so.logid = "app"
    so.enable_profiling = True
    so.enable_cpu_mem_arena = False
    so.enable_mem_pattern = False
    so.enable_mem_reuse = False
    so.optimized_model_filepath = os.devnull
    so.use_deterministic_compute = True
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    with pytest.raises(RuntimeError, match="does not have configuration with key"):
        so.get_session_config_entry("nope")
    so.add_free_dimension_override_by_name("N", 4)
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 4)
    with pytest.raises(TypeError):
        so.intra_op_num_threads = "2"
    with pytest.raises(TypeError):
        so.graph_optimization_level = 5
    so.graph_optimization_level = 0  # an int of a level is taken
    assert so.graph_optimization_level is kort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with pytest.raises(kort.NotImplemented, match="custom-op libraries"):
        so.register_custom_ops_library("/nonexistent/libcustom.so")
    s = kort.InferenceSession(demo_model, sess_options=so, providers=CPU)
    assert kiln_session_args[-1]["threads"] == 2 and kiln_session_args[-1]["optimize"] is False
    assert s.get_session_options() is so
    assert s.end_profiling() == ""
    want = kiln.Session(demo_model).run({"input": demo_input})["logits"]
    np.testing.assert_allclose(s.run(None, {"input": demo_input})[0], want, rtol=1e-5,
                               atol=1e-6)
    kort.InferenceSession(demo_model, kort.SessionOptions(), CPU)
    assert kiln_session_args[-1]["threads"] is None and kiln_session_args[-1]["optimize"] is True


def test_log_severity_level_gates_kiln_ort_messages(demo_model, caplog):
    import logging
    caplog.set_level(logging.DEBUG, logger="kiln.ort")
    so = kort.SessionOptions()
    so.log_severity_level = 0
    kort.InferenceSession(demo_model, so, CPU)
    assert any("kiln.ort session on cpu" in r.getMessage() for r in caplog.records)
    caplog.clear()
    so.log_severity_level = 3
    kort.InferenceSession(demo_model, so, CPU)
    assert not caplog.records


# ---- errors -----------------------------------------------------------------------------------

ORT_ERRORS = ["Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError",
              "RuntimeException", "InvalidProtobuf", "ModelLoaded", "NotImplemented",
              "InvalidGraph", "EPFail"]


def test_error_classes_are_onnx_runtimes(maybe_ort):
    for name in ORT_ERRORS:
        cls = getattr(kstate, name)
        assert cls.__name__ == name and issubclass(cls, Exception)
        assert issubclass(cls, kiln.Error)
        assert not issubclass(cls, ValueError)  # as ORT's: InvalidArgument is no ValueError
        assert getattr(kort, name) is cls
        if maybe_ort:
            real = getattr(maybe_ort.capi.onnxruntime_pybind11_state, name)
            assert issubclass(real, Exception) and not issubclass(real, ValueError)


def test_load_errors(tmp_path, maybe_ort):
    missing = str(tmp_path / "missing.onnx")
    garbage = b"\x08\x07garbage, not a model" * 10
    if maybe_ort:
        real = maybe_ort.capi.onnxruntime_pybind11_state
        with pytest.raises(real.NoSuchFile):
            maybe_ort.InferenceSession(missing)
        with pytest.raises(real.InvalidProtobuf):
            maybe_ort.InferenceSession(garbage)
    with pytest.raises(kort.NoSuchFile, match=r"^\[ONNXRuntimeError\] : 3 : NO_SUCHFILE : ") as e:
        kort.InferenceSession(missing)
    with pytest.raises(kiln.Error) as k:
        kiln.Session(missing)
    assert str(k.value) in str(e.value) and isinstance(e.value.__cause__, kiln.Error)
    assert e.value.kiln_error is e.value.__cause__

    with pytest.raises(kort.InvalidProtobuf, match="INVALID_PROTOBUF") as e:
        kort.InferenceSession(garbage)
    with pytest.raises(kiln.InvalidModel) as k:
        kiln.Session(garbage)
    assert str(k.value) in str(e.value)


def test_unsupported_op_is_not_implemented(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper as h
    g = h.make_graph([h.make_node("NoSuchOpAnywhere", ["x"], ["y"], domain="ai.kiln.none")],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [1])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("ai.kiln.none", 1)])
    path = str(tmp_path / "unsupported.onnx")
    onnx.save(m, path)
    with pytest.raises(kiln.Error) as k:
        kiln.Session(path)
    with pytest.raises((kort.NotImplemented, kort.InvalidGraph)) as e:
        kort.InferenceSession(path)
    assert str(k.value) in str(e.value)


def test_initializers_are_not_overridable(tmp_path, maybe_ort):
    """A graph input with an initializer: not among get_inputs() (as ORT), never overridable
    (ORT lists it in get_overridable_initializers() and takes a feed for it)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper
    vi = h.make_tensor_value_info
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "g",
                     [vi("x", T.FLOAT, [2]), vi("w", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])],
                     initializer=[numpy_helper.from_array(np.ones(2, np.float32), "w")])
    path = str(tmp_path / "init.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=8), path)
    s = kort.InferenceSession(path, providers=CPU)
    assert args(s.get_inputs()) == [("x", "tensor(float)", [2])]
    assert s.get_overridable_initializers() == []
    x = np.array([1, 2], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], [2, 3])
    with pytest.raises(kort.InvalidArgument, match="'w' is not an input"):
        s.run(None, {"x": x, "w": x})
    if maybe_ort:
        so = maybe_ort.SessionOptions()
        so.log_severity_level = 3
        ref = maybe_ort.InferenceSession(path, so, providers=CPU)
        assert args(ref.get_inputs()) == args(s.get_inputs())
        assert [i.name for i in ref.get_overridable_initializers()] == ["w"]


def test_run_errors(demo_model, demo_input, maybe_ort):
    ref = maybe_ort.InferenceSession(demo_model, providers=CPU) if maybe_ort else None
    s = kort.InferenceSession(demo_model, providers=CPU)
    k = kiln.Session(demo_model)
    # Missing feeds: ORT's ValueError, its message.
    for feeds in ({}, {"inputx": demo_input}):
        with pytest.raises(ValueError) as got:
            s.run(None, feeds)
        assert str(got.value) == "Required inputs (['input']) are missing from input feed " \
            f"({list(feeds)})."
        if ref:
            with pytest.raises(ValueError) as want:
                ref.run(None, feeds)
            assert str(got.value) == str(want.value)
    # Wrong dtype (strings where floats are declared), wrong shape, unknown output: ORT's
    # InvalidArgument with kiln's message.
    bad = [({"input": np.full((1, 1, 28, 28), "a")}, None),
           ({"input": np.zeros((1, 2, 28, 28), np.float32)}, None),
           ({"input": demo_input}, ["nope"])]
    for feeds, outputs in bad:
        if ref:
            with pytest.raises(maybe_ort.capi.onnxruntime_pybind11_state.InvalidArgument):
                ref.run(outputs, feeds)
        with pytest.raises(kort.InvalidArgument, match=r"^\[ONNXRuntimeError\] : 2 : "
                                                       r"INVALID_ARGUMENT : ") as got:
            s.run(outputs, feeds)
        with pytest.raises(kiln.InvalidArgument) as kiln_error:
            k.run(feeds, outputs)
        assert str(kiln_error.value) in str(got.value)
        assert not isinstance(got.value, ValueError)
    # A same-kind dtype (float64 for float32) is converted, where ORT raises.
    got = s.run(None, {"input": demo_input.astype(np.float64)})[0]
    np.testing.assert_allclose(got, s.run(None, {"input": demo_input})[0], rtol=1e-6, atol=1e-7)


# ---- install() --------------------------------------------------------------------------------

def run_python(code):
    import kiln as k
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(k.__file__)),
               PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_install_makes_onnxruntime_kiln_in_a_fresh_process(demo_model):
    out = run_python(f"""
        import sys, numpy as np
        import kiln.ort
        m = kiln.ort.install()
        assert kiln.ort.install() is m and kiln.ort.installed()
        import onnxruntime
        import onnxruntime as ort
        from onnxruntime import InferenceSession, SessionOptions, GraphOptimizationLevel
        import onnxruntime.capi._pybind_state as C
        from onnxruntime.capi import _pybind_state
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, NoSuchFile
        from onnxruntime.capi.onnxruntime_inference_collection import InferenceSession as IS2
        from onnxruntime.capi import onnxruntime_validation
        assert onnxruntime is m and InferenceSession is kiln.ort.InferenceSession is IS2
        assert C is _pybind_state and C.get_available_providers()[-1] == "CPUExecutionProvider"
        assert InvalidArgument is kiln.ort.InvalidArgument
        so = SessionOptions()
        so.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        s = ort.InferenceSession({demo_model!r}, so, providers=["CPUExecutionProvider"])
        y = s.run(None, {{"input": np.zeros((1, 1, 28, 28), np.float32)}})[0]
        try:
            ort.InferenceSession("/nonexistent/model.onnx")
        except NoSuchFile as e:
            print("nosuchfile ok")
        kiln.ort.uninstall()
        assert not kiln.ort.installed() and "onnxruntime" not in sys.modules
        assert not any(k.startswith("onnxruntime.") for k in sys.modules)
        print("ok", y.shape, ort.__version__)
    """)
    assert "nosuchfile ok" in out and "ok (1, 10) " in out and "+kiln" in out


def test_install_sets_aside_a_real_onnxruntime_and_uninstall_restores_it(ort):
    out = run_python("""
        import sys
        import onnxruntime as real
        import onnxruntime.capi._pybind_state as real_c
        before = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "onnxruntime"}
        import kiln.ort
        kiln.ort.install()
        import onnxruntime
        import onnxruntime.capi._pybind_state as C
        assert onnxruntime is kiln.ort and C is kiln.ort.capi._pybind_state
        try:
            import onnxruntime.quantization
            raise SystemExit("a real onnxruntime submodule was reachable under kiln.ort")
        except ImportError:
            pass
        kiln.ort.uninstall()
        import onnxruntime
        import onnxruntime.capi._pybind_state as C
        assert onnxruntime is real and C is real_c
        after = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "onnxruntime"}
        assert after == before
        print("restored")
    """)
    assert "restored" in out


def test_install_in_process_restores_the_real_onnxruntime(ort):
    real = sys.modules["onnxruntime"]
    try:
        m = kort.install()
        import onnxruntime
        assert onnxruntime is m is kort
        assert sys.modules["onnxruntime.capi.onnxruntime_pybind11_state"] is kstate
    finally:
        kort.uninstall()
    import onnxruntime
    assert onnxruntime is real and not kort.installed()
    kort.uninstall()  # a no-op when not installed


# ---- the cost of the layer -------------------------------------------------------------------

def test_run_adds_little_to_kiln_session_run(demo_model):
    """kiln.ort's run is a thin layer: per batch-1 run it costs a few microseconds more than
    kiln.Session.run (bounded loosely here, 25 us on the median, for busy machines; the two are
    timed alternately so that a change of the machine's load hits both)."""
    import time
    s = kort.InferenceSession(demo_model, providers=CPU)
    k = s.kiln_session
    feeds = {"input": np.zeros((1, 1, 28, 28), np.float32)}
    for _ in range(20):
        s.run(None, feeds)
        k.run(feeds)

    def overhead():
        a, b = [], []
        for _ in range(300):
            t0 = time.perf_counter()
            s.run(None, feeds)
            t1 = time.perf_counter()
            k.run(feeds)
            t2 = time.perf_counter()
            a.append(t1 - t0)
            b.append(t2 - t1)
        return sorted(a)[150] - sorted(b)[150]
    least = min(overhead() for _ in range(3))
    assert least < 25e-6, f"kiln.ort adds {least * 1e6:.1f} us per run"
