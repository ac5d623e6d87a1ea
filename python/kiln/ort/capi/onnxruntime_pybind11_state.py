"""kiln.ort's counterpart of `onnxruntime.capi.onnxruntime_pybind11_state`: the error classes, the
enums, SessionOptions, RunOptions, NodeArg, ModelMetadata, OrtValue and the module functions
(providers, device, version, logger severity). Plain Python over kiln; see docs/python.md for what
is honoured and what is accepted and ignored.

The error classes carry ONNX Runtime's names and its message form
"[ONNXRuntimeError] : <code> : <NAME> : <kiln's message>". Like ONNX Runtime's they are not
ValueError subclasses; they are kiln.Error subclasses (so also RuntimeError), and the kiln error
they came from is their __cause__ and their .kiln_error.
"""
from __future__ import annotations

import enum
import logging
import os
import re

import kiln

__all__ = [
    "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
    "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail",
    "ModelLoadCanceled", "ModelRequiresCompilation", "NotFound",
    "GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "OrtMemType",
    "SessionOptions", "RunOptions", "NodeArg", "ModelMetadata", "OrtValue",
    "get_available_providers", "get_all_providers", "get_device", "get_version_string",
    "get_build_info", "get_default_session_options", "set_default_logger_severity",
    "set_default_logger_verbosity", "set_seed", "enable_telemetry_events",
    "disable_telemetry_events", "ORT_API_VERSION", "VERSION",
]

# The ONNX Runtime release whose Python API this module follows and is tested against
# (python/tests/test_ort.py compares with it); kiln's version is the local label.
ORT_API_VERSION = "1.32.0"
VERSION = ORT_API_VERSION + "+kiln." + (
    ".".join(p for p in re.split(r"[^0-9A-Za-z]+", kiln.__version__) if p) or "0")


# ---- errors -----------------------------------------------------------------------------------

class _OrtError(kiln.Error):
    """Base of the ONNX Runtime-named errors (ONNX Runtime has no common base but Exception)."""
    code = 1
    status = "FAIL"
    kiln_error = None


def _error_class(name, code, status):
    cls = type(name, (_OrtError,), {"code": code, "status": status, "__module__": __name__,
                                    "__doc__": f"ONNX Runtime's {status} ({code})."})
    return cls


Fail = _error_class("Fail", 1, "FAIL")
InvalidArgument = _error_class("InvalidArgument", 2, "INVALID_ARGUMENT")
NoSuchFile = _error_class("NoSuchFile", 3, "NO_SUCHFILE")
NoModel = _error_class("NoModel", 4, "NO_MODEL")
EngineError = _error_class("EngineError", 5, "ENGINE_ERROR")
RuntimeException = _error_class("RuntimeException", 6, "RUNTIME_EXCEPTION")
InvalidProtobuf = _error_class("InvalidProtobuf", 7, "INVALID_PROTOBUF")
ModelLoaded = _error_class("ModelLoaded", 8, "MODEL_LOADED")
NotImplemented = _error_class("NotImplemented", 9, "NOT_IMPLEMENTED")  # noqa: A001 (ORT's name)
InvalidGraph = _error_class("InvalidGraph", 10, "INVALID_GRAPH")
EPFail = _error_class("EPFail", 11, "EP_FAIL")
ModelLoadCanceled = _error_class("ModelLoadCanceled", 12, "MODEL_LOAD_CANCELED")
ModelRequiresCompilation = _error_class("ModelRequiresCompilation", 13,
                                        "MODEL_REQUIRES_COMPILATION")
NotFound = _error_class("NotFound", 14, "NOT_FOUND")


def make_error(cls, message, kiln_error=None):
    """An instance of the ONNX Runtime-named class with ONNX Runtime's message form."""
    e = cls(f"[ONNXRuntimeError] : {cls.code} : {cls.status} : {message}")
    e.kiln_error = kiln_error
    return e


# Where a file's data does not parse as an ONNX model (as opposed to a model that parses and is
# wrong): kiln's InvalidModel messages for those name the protobuf or the parse.
_PARSE_WORDS = re.compile(r"protobuf|pars(e|ing)|not an onnx|serializ|decode|truncated",
                          re.IGNORECASE)


def load_error(e):
    """The ONNX Runtime-named error for a kiln error raised while a model loaded."""
    msg = str(e)
    if isinstance(e, kiln.NotFound):
        cls = NoSuchFile
    elif isinstance(e, kiln.InvalidModel):
        cls = InvalidProtobuf if _PARSE_WORDS.search(msg) else InvalidGraph
    elif isinstance(e, kiln.Unsupported):
        cls = NotImplemented
    elif isinstance(e, kiln.InvalidArgument):
        cls = InvalidArgument
    elif isinstance(e, (kiln.Unavailable, kiln.DeviceError)):
        cls = EPFail
    elif isinstance(e, (kiln.OutOfMemory, kiln.Internal)):
        cls = RuntimeException
    else:
        cls = Fail
    return make_error(cls, msg, e)


def run_error(e):
    """The ONNX Runtime-named error for a kiln error raised by a run."""
    if isinstance(e, kiln.InvalidArgument):
        cls = InvalidArgument
    elif isinstance(e, kiln.Unsupported):
        cls = NotImplemented
    elif isinstance(e, kiln.DeviceError):
        cls = EPFail
    elif isinstance(e, (kiln.OutOfMemory, kiln.Internal)):
        cls = RuntimeException
    else:
        cls = Fail
    return make_error(cls, str(e), e)


# ---- enums ------------------------------------------------------------------------------------

class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class OrtMemType(enum.IntEnum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


def _enum_value(enum_cls, value, what):
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return enum_cls(value)
        except ValueError:
            pass
    raise TypeError(f"{what} must be a {enum_cls.__name__} (onnxruntime.{enum_cls.__name__}."
                    f"{next(iter(enum_cls)).name}, ...); got {value!r}")


def _int_value(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int; got {value!r}")
    return value


# ---- logging ----------------------------------------------------------------------------------

# ONNX Runtime's severities (0 verbose, 1 info, 2 warning, 3 error, 4 fatal) as logging levels.
_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
_default_severity = 2
_default_verbosity = 0
logger = logging.getLogger("kiln.ort")


def set_default_logger_severity(severity):
    """The severity below which kiln.ort's own log messages are dropped (ONNX Runtime's 0-4;
    default 2, warnings). A session's SessionOptions.log_severity_level >= 0 overrides it."""
    global _default_severity
    severity = _int_value(severity, "severity")
    if not 0 <= severity <= 4:
        raise ValueError(f"severity must be 0 (verbose) to 4 (fatal); got {severity}")
    _default_severity = severity


def set_default_logger_verbosity(verbosity):
    """Accepted and stored; kiln has no verbose-log levels."""
    global _default_verbosity
    _default_verbosity = _int_value(verbosity, "verbosity")


def log(severity, message, session_severity=-1):
    """Logs `message` at ONNX Runtime severity `severity` on the "kiln.ort" logger unless the
    session's (or else the default) severity threshold is above it."""
    threshold = session_severity if session_severity is not None and session_severity >= 0 \
        else _default_severity
    if severity >= threshold:
        logger.log(_LEVELS[min(max(severity, 0), 4)], "%s", message)


# ---- options ----------------------------------------------------------------------------------

class SessionOptions:
    """ONNX Runtime's SessionOptions. Honoured: intra_op_num_threads (> 0: kiln's compute
    threads), graph_optimization_level (ORT_DISABLE_ALL: kiln's optimize=False) and
    log_severity_level (kiln.ort's own log messages). Every other attribute and method is accepted
    and stored, and has no effect (docs/python.md lists them); register_custom_ops_library raises
    NotImplemented."""

    def __init__(self):
        self._intra_op_num_threads = 0
        self._inter_op_num_threads = 0
        self._graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self._execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self._execution_order = ExecutionOrder.DEFAULT
        self._log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.optimized_model_filepath = ""
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config = {}
        self._free_dimension_overrides = {}
        self._free_dimension_overrides_by_denotation = {}

    intra_op_num_threads = property(
        lambda self: self._intra_op_num_threads,
        lambda self, v: setattr(self, "_intra_op_num_threads",
                                _int_value(v, "intra_op_num_threads")),
        doc="Threads of one run; 0 (the default): kiln's default, the machine's physical cores.")
    inter_op_num_threads = property(
        lambda self: self._inter_op_num_threads,
        lambda self, v: setattr(self, "_inter_op_num_threads",
                                _int_value(v, "inter_op_num_threads")),
        doc="Accepted and ignored (kiln runs nodes in sequence).")
    graph_optimization_level = property(
        lambda self: self._graph_optimization_level,
        lambda self, v: setattr(self, "_graph_optimization_level",
                                _enum_value(GraphOptimizationLevel, v,
                                            "graph_optimization_level")),
        doc="ORT_DISABLE_ALL runs the model as written (kiln's optimize=False); any other level "
            "runs kiln's full set of passes.")
    execution_mode = property(
        lambda self: self._execution_mode,
        lambda self, v: setattr(self, "_execution_mode",
                                _enum_value(ExecutionMode, v, "execution_mode")),
        doc="Accepted and ignored.")
    execution_order = property(
        lambda self: self._execution_order,
        lambda self, v: setattr(self, "_execution_order",
                                _enum_value(ExecutionOrder, v, "execution_order")),
        doc="Accepted and ignored.")
    log_severity_level = property(
        lambda self: self._log_severity_level,
        lambda self, v: setattr(self, "_log_severity_level", _int_value(v, "log_severity_level")),
        doc="kiln.ort's own log messages below this severity are dropped (-1: the default "
            "logger severity).")

    def add_session_config_entry(self, key, value):
        """Stored (get_session_config_entry returns it); no key changes what kiln does."""
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeError(f"SessionOptions does not have configuration with key: {key}") \
                from None

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        """Stored and ignored: kiln plans each run for the shapes it is given."""
        self._free_dimension_overrides[str(dim_name)] = _int_value(dim_value, "dim_value")

    def add_free_dimension_override_by_denotation(self, dim_denotation, dim_value):
        """Stored and ignored."""
        self._free_dimension_overrides_by_denotation[str(dim_denotation)] = \
            _int_value(dim_value, "dim_value")

    def register_custom_ops_library(self, library_path):
        raise make_error(NotImplemented,
                         "kiln.ort cannot load ONNX Runtime custom-op libraries "
                         f"('{library_path}'): kiln runs its own operators only "
                         "(docs/support-matrix.md)")

    def add_initializer(self, name, ort_value):
        raise make_error(NotImplemented, "kiln.ort does not override initializers "
                         f"(add_initializer('{name}', ...))")

    def add_external_initializers(self, names, ort_values):
        raise make_error(NotImplemented, "kiln.ort does not take external initializers from "
                         "memory; keep them in the model's external data files")

    def add_provider(self, provider_name, provider_options=None):
        raise make_error(NotImplemented, "kiln.ort takes providers from InferenceSession's "
                         "providers argument only")

    def has_providers(self):
        return False


class RunOptions:
    """ONNX Runtime's RunOptions: terminate=True makes run() raise Fail; the rest is stored."""

    def __init__(self):
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeError(f"RunOptions does not have configuration with key: {key}") \
                from None


def get_default_session_options():
    return SessionOptions()


# ---- model description ------------------------------------------------------------------------

# kiln's dtype names as ONNX Runtime's type strings.
_TYPE_NAMES = {
    "float32": "tensor(float)", "float64": "tensor(double)", "float16": "tensor(float16)",
    "bfloat16": "tensor(bfloat16)", "uint8": "tensor(uint8)", "int8": "tensor(int8)",
    "uint16": "tensor(uint16)", "int16": "tensor(int16)", "int32": "tensor(int32)",
    "int64": "tensor(int64)", "uint32": "tensor(uint32)", "uint64": "tensor(uint64)",
    "bool": "tensor(bool)", "string": "tensor(string)",
}


def type_string(dtype_name):
    """'tensor(float)' for 'float32' (a kiln or numpy dtype name)."""
    return _TYPE_NAMES.get(dtype_name, f"tensor({dtype_name})")


def numpy_type_string(dtype):
    """ONNX Runtime's type string of a numpy dtype."""
    if dtype.kind in "USO":
        return "tensor(string)"
    return type_string(dtype.name)


class NodeArg:
    """A model input or output as ONNX Runtime describes it: name, type ('tensor(float)', ...)
    and shape (a list of ints, symbol names and None; [] when the model declares no shape)."""
    __slots__ = ("name", "type", "shape")

    def __init__(self, name, type, shape):  # noqa: A002 (ORT's names)
        self.name = name
        self.type = type
        self.shape = shape

    def __str__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __repr__ = __str__

    def __eq__(self, other):
        return (isinstance(other, NodeArg) and self.name == other.name
                and self.type == other.type and self.shape == other.shape)

    __hash__ = None


class ModelMetadata:
    """ONNX Runtime's ModelMetadata. version is the model's model_version; kiln reads an unset one
    as 0, reported here as ONNX Runtime reports an unset version (2**63 - 1)."""
    __slots__ = ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map")

    def __init__(self, meta):
        self.producer_name = meta.producer_name
        self.graph_name = meta.graph_name
        self.domain = meta.domain
        self.description = meta.doc_string
        self.graph_description = meta.graph_doc_string
        self.version = meta.model_version if meta.model_version else 2 ** 63 - 1
        self.custom_metadata_map = dict(meta.custom)


# ---- values -----------------------------------------------------------------------------------

class OrtValue:
    """A CPU tensor: a numpy array (shared, not copied, when it is C-contiguous). run() accepts it
    as a feed (read in place through DLPack); numpy() returns the array itself."""
    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    @staticmethod
    def _check_device(device_type):
        if str(device_type).lower() != "cpu":
            raise make_error(NotImplemented, f"kiln.ort holds OrtValues on the CPU only "
                             f"(device_type='{device_type}'); kiln copies feeds to the GPU "
                             "itself when the session runs on CUDA")

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0, vendor_id=-1):
        import numpy as np
        OrtValue._check_device(device_type)
        a = np.asarray(numpy_obj)
        return OrtValue(a if a.flags.c_contiguous else np.array(a, order="C"))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0,
                                     vendor_id=-1):
        import numpy as np
        OrtValue._check_device(device_type)
        return OrtValue(np.empty(tuple(shape), dtype=element_type))

    def numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return numpy_type_string(self._array.dtype)

    def element_type(self):
        return self._array.dtype.type

    def device_name(self):
        return "cpu"

    def data_ptr(self):
        return self._array.ctypes.data

    def is_tensor(self):
        return True

    def is_sparse_tensor(self):
        return False

    def is_tensor_sequence(self):
        return False

    def has_value(self):
        return True

    def update_inplace(self, np_arr):
        import numpy as np
        np.copyto(self._array, np_arr)

    def as_sparse_tensor(self):
        raise make_error(NotImplemented, "kiln.ort has no sparse tensors")

    # kiln's run reads a feed with __dlpack__ in place; numpy converts it with __array__.
    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def __array__(self, dtype=None, copy=None):
        if dtype is None or dtype == self._array.dtype:
            return self._array
        return self._array.astype(dtype)

    def __repr__(self):
        return f"OrtValue({self.data_type()}, shape={self.shape()}, device='cpu')"


# ---- providers and the machine ----------------------------------------------------------------

# Every execution provider name ONNX Runtime knows (get_all_providers); a name outside this list
# is an unknown provider type.
ALL_PROVIDERS = [
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider",
    "ROCMExecutionProvider", "OpenVINOExecutionProvider", "DnnlExecutionProvider",
    "TvmExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider",
    "NnapiExecutionProvider", "VSINPUExecutionProvider", "JsExecutionProvider",
    "CoreMLExecutionProvider", "ArmNNExecutionProvider", "ACLExecutionProvider",
    "DmlExecutionProvider", "RknpuExecutionProvider", "WebNNExecutionProvider",
    "WebGpuExecutionProvider", "XnnpackExecutionProvider", "CANNExecutionProvider",
    "AzureExecutionProvider", "NvTensorRTRTXExecutionProvider", "CPUExecutionProvider",
]
_cuda_available = None


def cuda_available():
    """kiln.doctor()'s word on whether a CUDA run is possible here (asked once per process)."""
    global _cuda_available
    if _cuda_available is None:
        try:
            _cuda_available = bool(kiln.doctor().get("cuda", {}).get("execution_available"))
        except Exception:  # a doctor that cannot look counts as no GPU
            _cuda_available = False
    return _cuda_available


def get_available_providers():
    """['CUDAExecutionProvider', 'CPUExecutionProvider'] where kiln can run on a GPU here,
    else ['CPUExecutionProvider']."""
    return (["CUDAExecutionProvider"] if cuda_available() else []) + ["CPUExecutionProvider"]


def get_all_providers():
    return list(ALL_PROVIDERS)


def get_device():
    return "GPU" if cuda_available() else "CPU"


def get_version_string():
    return VERSION


def get_build_info():
    return f"kiln.ort {VERSION} (kiln {kiln.__version__}, {os.path.dirname(kiln.__file__)})"


def set_seed(seed):
    """Accepted and ignored: kiln's operators draw no random numbers."""
    _int_value(seed, "seed")


def enable_telemetry_events():
    """A no-op: kiln sends nothing anywhere."""


def disable_telemetry_events():
    """A no-op: kiln sends nothing anywhere."""
