// Reading ONNX TensorProto files (the .pb format of ONNX's test data) into kiln Tensors.
#pragma once

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::onnxio {

// Parses a serialized TensorProto. `name` is filled with the tensor's name when non-null.
StatusOr<Tensor> ParseTensorProto(const std::string& bytes, std::string* name = nullptr);
// Parses a serialized value of type `expected`: a SequenceProto for a sequence type, an
// OptionalProto for an optional type, else a TensorProto (ONNX's test data for such inputs).
StatusOr<Tensor> ParseValueProto(const std::string& bytes, DataType expected,
                                 std::string* name = nullptr);
StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name = nullptr);
// Writes a Tensor as a serialized TensorProto (raw_data).
Status WriteTensorProtoFile(const Tensor& t, const std::string& name, const std::string& path);

}  // namespace kiln::onnxio
