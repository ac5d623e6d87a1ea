// ShapeProbe: what the passes can know about value shapes at load time, before input shapes are
// given. Each symbolic or unknown input dim is bound to a probe size (a distinct size per symbol)
// and every op's own shape inference (ir::Op::Infer) runs over the graph, evaluating small
// constant sub-graphs (Shape -> Gather -> Concat chains, under 64 Ki elements) so Reshape targets
// resolve. This is done twice with different probe sizes: a dim that comes out the same in both is
// fixed, one that differs depends on a symbol. Two values have the same shape when their shapes
// agree in both probes, which is what a fusion needing "exactly this shape" relies on.
//
// Limits: a node whose inputs are unknown, whose op is unsupported, whose output shape needs a
// run-time value, or whose inference fails under the probe sizes (e.g. a Reshape that only works
// for batch 1) leaves its outputs unknown, and passes then do not fuse there. Never fails.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"
#include "kiln/tensor.h"

namespace kiln::passes {

class ShapeProbe {
 public:
  static ShapeProbe Run(const ir::Graph& graph);

  // kUndefined when unknown.
  DataType dtype(int v) const;
  // The shape when known in both probes, with -1 for dims that depend on a symbol.
  std::optional<Shape> shape(int v) const;
  std::optional<int64_t> rank(int v) const;
  // Both shapes known and equal in both probes.
  bool SameShape(int a, int b) const;

 private:
  std::vector<DataType> dtypes_;
  std::vector<std::optional<Shape>> probe_[2];
};

}  // namespace kiln::passes
