// InlineStaticIfs: replaces every If whose condition is known once the graph inputs' shapes are
// (exporters write shape checks such as If(Equal(Gather(Shape(x), 0), 1)), Silero VAD has 24 of
// them in its bodies) by the nodes of the branch it takes, repeatedly, so branches holding Ifs
// are inlined too. Conditions are computed by the ops' own inference and reference kernels on
// the concrete input shapes and the constants (inputs under 64 Ki elements). An If left in the
// graph makes everything after it run on reference kernels (its output shapes are known only by
// running it); inlined, the branch's nodes are planned and optimized like the rest.
// Used on control-flow bodies, which are planned per input-shape signature
// (backends/cpu/control_flow.cc). Returns how many Ifs were inlined.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::passes {

// `input_shapes`: one per graph input, in order; the inputs' dtypes must be set in the graph.
StatusOr<int> InlineStaticIfs(ir::Graph& graph, const std::vector<Shape>& input_shapes);

}  // namespace kiln::passes
