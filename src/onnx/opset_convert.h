// Converting a model to a newer opset of the default domain, for the INT8 quantizer: per-channel
// weight scales need DequantizeLinear-13, so models of opsets 10-12 are taken to 13 first, as ONNX
// Runtime's quantizer does.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/status.h"

namespace kiln::onnxio {

// The serialized model taken to opset 13. Opset 12 is converted here, in every graph (If/Loop/Scan
// bodies included): the only ops whose meaning changed at 13 are rewritten (Split's `split`,
// Squeeze/Unsqueeze's and ReduceSum's `axes` become inputs; Softmax, LogSoftmax and Hardmax with
// an axis other than -1 become Flatten -> op(axis -1) -> Reshape to the input's shape, which is
// opset 12's "coerce to 2-D" without needing the input's rank). Opsets 10 and 11 first go to 12
// through ONNX's version converter (libonnx). Already 13 or newer: returned unchanged.
// Unsupported with the converter's reason when it cannot adapt an op.
StatusOr<std::string> ConvertToOpset13(const std::string& model_bytes);

}  // namespace kiln::onnxio
