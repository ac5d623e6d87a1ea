// Float16 between kernels: under SessionOptions::precision "fp16", on a backend whose kernels
// declare float16 data inputs (KernelDef::half_inputs), the session stores activations as float16
// wherever the kernels on both sides take it, so memory traffic and arena bytes halve. Run at load
// after the optimizer (and after float16 models were lowered to float32, passes/lower_float16.h),
// before the model is built.
#pragma once

#include <string>

#include "ir/graph.h"
#include "kiln/status.h"
#include "runtime/kernel.h"

namespace kiln::runtime {

// Whether input `slot` is among `half_inputs` (KernelDef::half_inputs, kAllInputs for every
// input): the rewrite below and the kernels' Supports() read the lists the same way.
template <typename List>
bool IsHalfInput(const List& half_inputs, size_t slot) {
  for (int i : half_inputs)
    if (i == kAllInputs || i == static_cast<int>(slot)) return true;
  return false;
}

// A node runs in float16 when a kernel of `backend` that runs under fp16 declares half inputs,
// every such input it has is float32, its outputs are float32 and not computed from constants
// alone, and every constant among those inputs fits float16's range (|x| <= 65504; else it stays
// float32 rather than turn into infinity). Its float outputs become float16 values. A float32 value
// that such a node reads gets one Cast to float16 (a constant: one float16 copy, rounded to nearest
// even); a float16 value that a float32 reader, a non-data input or the graph's outputs need gets
// one Cast back, so the graph's inputs and outputs keep their names and types. Graphs with
// subgraphs (If, Loop, Scan) are left alone. `what` receives a one-line summary when anything
// changed.
Status StoreHalfBetweenKernels(ir::Graph& graph, Backend backend, std::string* what);

}  // namespace kiln::runtime
