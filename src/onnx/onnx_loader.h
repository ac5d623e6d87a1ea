// ONNX protobuf -> ir::Graph. The only module that includes ONNX's generated headers. Parses with
// Debian's libprotobuf/libonnx, runs ONNX's checker on every node (shapes are inferred later by
// kiln's own per-op inference, once concrete input shapes are known), decodes
// initializers and Constant attributes, and reads external data files confined to the model's
// folder. Stateless; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::onnxio {

// Loads the model at `path`. External data `location`s resolve relative to the model's folder.
StatusOr<std::unique_ptr<ir::Graph>> LoadModel(const std::string& path);
// Loads a serialized ModelProto; `model_dir` anchors external data ("" forbids external data).
StatusOr<std::unique_ptr<ir::Graph>> LoadModelFromBytes(const std::string& bytes,
                                                        const std::string& model_dir);

}  // namespace kiln::onnxio
