// Float16 and bfloat16 models, computed in float32: run at load on every graph (not an optional
// optimization, so also with SessionOptions::optimize off).
#pragma once

#include <string>

#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::passes {

// Rewrites the graph so that every value of dtype float16 or bfloat16 inside it is float32:
// weights (initializers, Constant and ConstantOfShape values) are converted once; a graph input
// of those types gets a Cast to float32 after it and a graph output a Cast back before it, so the
// model's declared inputs and outputs keep their types; Cast/EyeLike targets of those types
// become float32. The converted model computes in float32, which rounds less than the float16
// arithmetic it describes. `what` receives a one-line summary when anything changed.
Status LowerHalfFloats(ir::Graph& graph, std::string* what);

}  // namespace kiln::passes
