"""kiln.ort's counterpart of `onnxruntime.capi`: the modules applications import from it
(_pybind_state, onnxruntime_pybind11_state, onnxruntime_inference_collection,
onnxruntime_validation)."""
