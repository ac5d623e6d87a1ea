"""kiln.ort's counterpart of `onnxruntime.capi.onnxruntime_inference_collection`: InferenceSession
(over kiln.Session), OrtValue and the providers' argument checks.

Providers, as ONNX Runtime 1.32 treats them:
  - names or (name, options) tuples, or names with provider_options; the first one kiln can run
    decides the device: 'CPUExecutionProvider' -> "cpu"; 'CUDAExecutionProvider' (option
    device_id), 'TensorrtExecutionProvider' and 'NvTensorRTRTXExecutionProvider' -> "cuda:N"
    where kiln.doctor() says CUDA runs here. None: every available provider (CUDA first where
    available).
  - a provider that is not available (CUDA without a GPU, OpenVINO, ...): a UserWarning with
    ONNX Runtime's text, and the next one (in the end the CPU);
  - an unknown provider name: the UserWarning, then the session falls back to the CPU with a
    second warning, or raises RuntimeError("Unknown Provider Type: ...") with enable_fallback=0;
    malformed providers or provider_options the same, with ORT's ValueError;
  - CUDA available but kiln's CUDA session fails (kiln.Unavailable, DeviceError, or Unsupported:
    a node the CUDA backend cannot run): a warning with kiln's reason, then the CPU.
"""
from __future__ import annotations

import collections.abc
import os
import warnings

import kiln

from . import onnxruntime_pybind11_state as C
from .onnxruntime_pybind11_state import (  # noqa: F401 (re-exported as ORT does)
    ModelMetadata, NodeArg, OrtValue, RunOptions, SessionOptions)

__all__ = ["InferenceSession", "Session", "OrtValue", "check_and_normalize_provider_args"]

_CPU = "CPUExecutionProvider"
_CUDA = "CUDAExecutionProvider"
_GPU_PROVIDERS = (_CUDA, "TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider")
# kiln's errors on which a CUDA session falls back to the CPU, as ORT runs on the CPU what CUDA
# cannot: no GPU or driver (Unavailable), a failed CUDA call (DeviceError), a node kiln's CUDA
# backend has no kernel for (Unsupported).
_CUDA_FAILURES = (kiln.Unavailable, kiln.DeviceError, kiln.Unsupported)


def check_and_normalize_provider_args(providers, provider_options, available_provider_names):
    """(names, options dicts with str keys and values) from ONNX Runtime's `providers` and
    `provider_options` arguments; warns about names not available and duplicates; ValueError on
    malformed arguments (ONNX Runtime's checks and messages)."""
    if providers is None:
        return [], []
    if isinstance(providers, str):
        providers = [providers]
    normalized = collections.OrderedDict()

    def add(name, options):
        if name not in available_provider_names:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available_provider_names)}'",
                          stacklevel=4)
        if name in normalized:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=4)
            return
        normalized[name] = {str(k): str(v) for k, v in options.items()}

    if not isinstance(providers, collections.abc.Sequence):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if "
                             "both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if "
                             "'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        for name, options in zip(providers, provider_options):
            add(name, options)
    else:
        for p in providers:
            if isinstance(p, str):
                add(p, {})
            elif (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                  and isinstance(p[1], dict)):
                add(p[0], p[1])
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) "
                                 "tuples.")
    return list(normalized), list(normalized.values())


def _truthy(text):
    return str(text).strip().lower() in ("1", "true", "yes", "on")


class InferenceSession:
    """onnxruntime.InferenceSession over a kiln.Session.

    InferenceSession(path_or_bytes, sess_options=None, providers=None, provider_options=None,
                     **kwargs); kwargs: enable_fallback (1, 0); others accepted and ignored.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path = os.fspath(path_or_bytes)
            self._model_bytes = None
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path = None
            self._model_bytes = bytes(path_or_bytes)
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        self._enable_fallback = int(kwargs.get("enable_fallback", 1)) == 1
        self._create_session(providers, provider_options)

    # ---- making the kiln session ----------------------------------------------------------------

    def _choose(self, providers, provider_options):
        """(device, precision, ORT provider names, their options) for these arguments."""
        available = C.get_available_providers()
        if providers is None and provider_options is None:
            names, options = available, [{} for _ in available]
        else:
            names, options = check_and_normalize_provider_args(providers, provider_options,
                                                               available)
        unknown = [n for n in names if n not in C.ALL_PROVIDERS]
        if unknown:
            raise RuntimeError(f"Unknown Provider Type: {unknown[0]}")
        for name, opts in zip(names, options):
            if name == _CPU:
                break
            if name in _GPU_PROVIDERS and _CUDA in available:
                try:
                    index = int(opts.get("device_id", 0))
                except ValueError:
                    raise ValueError(f"{name}: device_id must be an int; got "
                                     f"'{opts.get('device_id')}'") from None
                fp16 = _truthy(opts.get("trt_fp16_enable", "0")) and name != _CUDA
                cuda_opts = dict(opts, device_id=str(index))
                return f"cuda:{index}", "fp16" if fp16 else "fp32", [_CUDA, _CPU], \
                    [cuda_opts, {}]
        return "cpu", "fp32", [_CPU], [{}]

    def _load(self, device, precision):
        so = self._sess_options
        threads = so.intra_op_num_threads if so.intra_op_num_threads > 0 else None
        optimize = so.graph_optimization_level != C.GraphOptimizationLevel.ORT_DISABLE_ALL
        model = self._model_path if self._model_path is not None else self._model_bytes
        try:
            return kiln.Session(model, device=device, precision=precision, threads=threads,
                                optimize=optimize)
        except kiln.Error as e:
            if device != "cpu" and isinstance(e, _CUDA_FAILURES):
                raise
            raise C.load_error(e) from e

    def _create_session(self, providers, provider_options):
        try:
            device, precision, names, options = self._choose(providers, provider_options)
        except (ValueError, RuntimeError) as e:  # bad providers: ORT's fallback takes the CPU
            if not self._enable_fallback:
                raise
            warnings.warn(f"EP Error {e} when using {providers}; falling back to ['{_CPU}'] "
                          "and retrying.", stacklevel=3)
            device, precision, names, options = "cpu", "fp32", [_CPU], [{}]
            self._enable_fallback = False  # fallback only once, as ORT
        try:
            session = self._load(device, precision)
        except _CUDA_FAILURES as e:  # CUDA listed, but kiln's CUDA session failed
            warnings.warn(f"{_CUDA} is not used: kiln's CUDA session failed ({e}); running on "
                          f"{_CPU}.", stacklevel=3)
            C.log(2, f"{_CUDA} not used ({e}); the session runs on the CPU",
                  self._sess_options.log_severity_level)
            device, precision, names, options = "cpu", "fp32", [_CPU], [{}]
            session = self._load(device, precision)
        self._session = session
        self._run = session.run
        self._device = device
        self._providers = names
        self._provider_options = dict(zip(names, options))
        self._inputs_meta = [self._node_arg(s) for s in session._input_specs()]
        self._outputs_meta = [self._node_arg(s) for s in session._output_specs()]
        self._input_names = [i.name for i in self._inputs_meta]
        self._model_meta = C.ModelMetadata(session.model_metadata)
        C.log(1, f"kiln.ort session on {device} ({session.device_description()}), threads="
              f"{self._sess_options.intra_op_num_threads or 'default'}",
              self._sess_options.log_severity_level)

    @staticmethod
    def _node_arg(spec):
        shape = spec["shape"]
        return NodeArg(spec["name"], C.type_string(spec["kiln_dtype"]),
                       list(shape) if shape is not None else [])

    # ---- running --------------------------------------------------------------------------------

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named (all of them, in the model's order, when output_names is None or
        empty) as a list of numpy arrays, for input_feed {input name: array or OrtValue}."""
        if run_options is not None and run_options.terminate:
            raise C.make_error(C.Fail, "Exiting due to terminate flag being set to true.")
        try:
            if output_names:
                out = self._run(input_feed, output_names)
                return [out[n] for n in output_names]
            return list(self._run(input_feed).values())
        except kiln.Error as e:
            error = self._run_failed(e, input_feed)
            if error is None:  # fell back to the CPU: once more there
                return self.run(output_names, input_feed, run_options)
            raise error from e

    def _run_failed(self, e, input_feed):
        """The exception to raise for kiln's error `e` (ORT's ValueError for missing inputs), or
        None after falling back to the CPU from a CUDA device error."""
        if isinstance(input_feed, dict):
            missing = [n for n in self._input_names if n not in input_feed]
            if missing:
                return ValueError(f"Required inputs ({missing}) are missing from input feed "
                                  f"({list(input_feed)}).")
        if isinstance(e, kiln.DeviceError) and self._device != "cpu" and self._enable_fallback:
            warnings.warn(f"EP Error: {e} using {self._providers}; falling back to ['{_CPU}'] "
                          "and retrying.", stacklevel=3)
            self._enable_fallback = False
            self._reset([_CPU], None)
            return None
        return C.run_error(e)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        """run() with OrtValues in and out."""
        return [OrtValue(a) for a in self.run(output_names, input_dict_ort_values, run_options)]

    # ---- description ----------------------------------------------------------------------------

    def get_inputs(self):
        return self._inputs_meta

    def get_outputs(self):
        return self._outputs_meta

    def get_overridable_initializers(self):
        """Always []: kiln does not let a feed override an initializer."""
        return []

    def get_modelmeta(self):
        return self._model_meta

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {k: dict(v) for k, v in self._provider_options.items()}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        """Makes the session again with these providers (the model is loaded again)."""
        self._reset(providers, provider_options)

    def _reset(self, providers, provider_options):
        self._create_session(providers, provider_options)

    def disable_fallback(self):
        self._enable_fallback = False

    def enable_fallback(self):
        self._enable_fallback = True

    def end_profiling(self):
        """Always "": kiln writes no ONNX Runtime profile (enable_profiling is ignored; use
        `kiln bench` or kiln.Session.bench for timings)."""
        return ""

    def get_profiling_start_time_ns(self):
        return 0

    def io_binding(self):
        raise NotImplementedError("kiln.ort has no IOBinding: use run() (kiln reads C-contiguous "
                                  "feeds in place and returns outputs without a copy)")

    @property
    def kiln_session(self):
        """The kiln.Session underneath (stats(), bench(), describe_plan(), ...)."""
        return self._session


Session = InferenceSession
