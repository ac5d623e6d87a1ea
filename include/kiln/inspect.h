// InspectModel: what a model file is and whether kiln can run it, without preparing it to run
// (`kiln inspect`). Loading checks every node against kiln's ops, so all unsupported nodes are
// reported at once, by name, op and opset. For what the optimizer and the planner make of it,
// load a Session (Session::optimization_log, optimized_op_counts, DescribePlanSummary).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/session.h"
#include "kiln/status.h"

namespace kiln {

struct ModelReport {
  ModelMetadata metadata;
  std::vector<TensorSpec> inputs, outputs;
  // Parameters, op counts and nodes include those of control-flow bodies (If, Loop, Scan).
  int64_t parameters = 0;  // elements of every initializer and Constant value
  int64_t parameter_bytes = 0;
  std::vector<std::pair<std::string, int>> op_counts;  // "Conv" / "kiln.FusedConv", as loaded
  int nodes = 0;
  // Empty when every node has a kiln implementation; else the message naming each node kiln
  // cannot run (the one Session::Load returns as Unsupported).
  std::string unsupported;
};

// NotFound / InvalidModel for a file that is missing or not a valid ONNX model; an unsupported
// node is not an error here (see ModelReport::unsupported).
StatusOr<ModelReport> InspectModel(const std::string& path);

}  // namespace kiln
