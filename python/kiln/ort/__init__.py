"""kiln.ort: the parts of the `onnxruntime` Python module applications use, run by kiln.

    import kiln.ort as ort                     # or: kiln.ort.install(); import onnxruntime as ort
    sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
    logits, = sess.run(None, {"input": x})

InferenceSession, SessionOptions, RunOptions, GraphOptimizationLevel, ExecutionMode, OrtValue,
NodeArg, ModelMetadata, get_available_providers(), get_device(), get_version_string(),
set_default_logger_severity() and the error classes of `onnxruntime.capi.onnxruntime_pybind11_state`
(Fail, InvalidArgument, NoSuchFile, InvalidProtobuf, ...). install() puts this module in
sys.modules as `onnxruntime` (and its submodules as `onnxruntime.capi....`), so code that imports
onnxruntime runs on kiln unchanged; uninstall() puts back what was there. docs/python.md lists
what is supported, accepted but ignored, and not supported.

__version__ is "<ONNX Runtime API version>+kiln.<kiln version>" (e.g. "1.32.0+kiln.0.1.0"): the
ONNX Runtime release whose Python API this follows and is tested against, kiln's version as the
local label (packaging.version parses it; it compares as that ONNX Runtime release).
"""
from __future__ import annotations

import importlib
import sys

from .capi import onnxruntime_validation  # noqa: F401
from .capi.onnxruntime_inference_collection import (  # noqa: F401
    InferenceSession, OrtValue, Session, check_and_normalize_provider_args)
from .capi.onnxruntime_pybind11_state import (  # noqa: F401
    EPFail, EngineError, ExecutionMode, ExecutionOrder, Fail, GraphOptimizationLevel,
    InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoaded, ModelMetadata, NoModel,
    NoSuchFile, NodeArg, NotFound, NotImplemented, OrtMemType, RunOptions, RuntimeException,
    SessionOptions, VERSION, disable_telemetry_events, enable_telemetry_events,
    get_all_providers, get_available_providers, get_build_info, get_default_session_options,
    get_device, get_version_string, set_default_logger_severity, set_default_logger_verbosity,
    set_seed)
from .capi import _pybind_state  # noqa: F401  (loaded so install() can register it)

__version__ = VERSION
__author__ = "kiln"

# The submodules install() registers under onnxruntime.*, in import order.
_SUBMODULES = ("capi", "capi.onnxruntime_pybind11_state", "capi.onnxruntime_inference_collection",
               "capi._pybind_state", "capi.onnxruntime_validation")
_saved = None  # what sys.modules held under onnxruntime* before install()


def _is_onnxruntime(name):
    return name == "onnxruntime" or name.startswith("onnxruntime.")


def install():
    """Makes `import onnxruntime` (and `onnxruntime.capi._pybind_state`, ...) give kiln.ort.
    Modules of a real onnxruntime already imported are set aside (uninstall() restores them);
    code that already holds them keeps them. Idempotent; returns this module."""
    global _saved
    me = sys.modules[__name__]
    if sys.modules.get("onnxruntime") is me:
        return me
    _saved = {k: v for k, v in sys.modules.items() if _is_onnxruntime(k)}
    for k in _saved:
        del sys.modules[k]
    sys.modules["onnxruntime"] = me
    for sub in _SUBMODULES:
        sys.modules["onnxruntime." + sub] = importlib.import_module(__name__ + "." + sub)
    return me


def uninstall():
    """Undoes install(): removes kiln.ort's onnxruntime* entries from sys.modules and puts back
    what was there before. A no-op when not installed."""
    global _saved
    if sys.modules.get("onnxruntime") is not sys.modules[__name__]:
        return
    for k in [k for k in sys.modules if _is_onnxruntime(k)]:
        del sys.modules[k]
    sys.modules.update(_saved or {})
    _saved = None


def installed():
    """True while install() is in effect."""
    return sys.modules.get("onnxruntime") is sys.modules[__name__]
