// Tensors to and from files, for programs that feed kiln from disk: NumPy .npy (any dtype kiln
// has, C order) and ONNX TensorProto .pb files (what ONNX's node tests and many exporters write).
// Plain functions; thread-safe.
#pragma once

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

// Reads a .npy or .pb file, chosen by the extension; InvalidArgument naming the file otherwise.
StatusOr<Tensor> ReadTensorFile(const std::string& path);
StatusOr<Tensor> ReadNpyFile(const std::string& path);
// Writes `t` as a .npy file (version 1.0 header, C order). Types numpy lacks are written the way
// numpy saves ml_dtypes' arrays, as raw bytes: bfloat16 as "<V2", the 8-bit floats and
// float4e2m1 as "|V1" (read with np.load(path).view(ml_dtypes.<DataTypeName>)); int4 and uint4 as
// int8 and uint8 values.
Status WriteNpyFile(const Tensor& t, const std::string& path);
// A file name for a tensor name: every character outside [A-Za-z0-9._-] replaced by '_' (and
// "", "." or ".." prefixed with '_'), so an output name never leaves its folder.
std::string TensorFileName(const std::string& name);
// A float32 tensor converted to float16 or bfloat16 (round to nearest even), or copied when `to`
// is float32; Unsupported for other conversions.
StatusOr<Tensor> ConvertFloatTensor(const Tensor& t, DataType to);

}  // namespace kiln
