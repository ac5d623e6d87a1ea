"""kiln.ort's counterpart of `onnxruntime.capi.onnxruntime_validation`: nothing to validate (no
CUDA or distribution checks at import)."""
from .onnxruntime_pybind11_state import VERSION


def check_distro_info():
    """A no-op (ONNX Runtime warns about untested Linux distributions here)."""


def validate_build_package_info():
    """A no-op."""


def get_package_name_and_version_info():
    """("kiln-ort", kiln.ort's version, "") as (package name, version, CUDA version)."""
    return "kiln-ort", VERSION, ""
