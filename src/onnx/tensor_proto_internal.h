// Shared by onnx_loader.cc and tensor_proto.cc; includes ONNX's generated header.
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

}  // namespace kiln::onnxio
