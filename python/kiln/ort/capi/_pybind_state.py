"""kiln.ort's counterpart of `onnxruntime.capi._pybind_state` (what
`import onnxruntime.capi._pybind_state as C` gives): everything of onnxruntime_pybind11_state, plus
InferenceSession."""
from .onnxruntime_inference_collection import InferenceSession  # noqa: F401
from .onnxruntime_pybind11_state import *  # noqa: F401,F403
from .onnxruntime_pybind11_state import __all__ as _state_all

__all__ = list(_state_all) + ["InferenceSession"]
