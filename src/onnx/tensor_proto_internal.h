// Shared by onnx_loader.cc, onnx_writer.cc and tensor_proto.cc; includes ONNX's generated header.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::onnxio {

// Decodes `proto`. `model_dir` anchors external data ("" forbids it); `what` names the tensor in
// errors ("initializer 'conv1.weight'").
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& model_dir,
                                 const std::string& what);

// Encodes `t` (a plain or string tensor; raw data, 4-bit types packed two per byte) as `proto`
// named `name`; InvalidArgument for sequences and optionals.
Status TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto);

}  // namespace kiln::onnxio
