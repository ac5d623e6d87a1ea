// Helpers shared by the element-indexing ops (GatherElements, GatherND, ScatterElements,
// ScatterND): a row-major multi-index counter, ONNX index normalisation with the error message
// the ops report, and the scatter `reduction` attribute (parsed once at load, applied per element).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/op.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "ops/common.h"

namespace kiln::ops {

// Advances `idx` to the next row-major index of `shape`; false after the last one.
inline bool NextIndex(std::vector<int64_t>& idx, const Shape& shape) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (++idx[d] < shape[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// Maps index i into [0, dim) (negative counts from the end); false when outside [-dim, dim).
inline bool WrapIndex(int64_t& i, int64_t dim) {
  if (i < -dim || i >= dim) return false;
  if (i < 0) i += dim;
  return true;
}

// "indices must be in [-dim, dim) for axis a; got i".
inline std::string IndexRule(int64_t dim, int64_t axis, int64_t i) {
  return "indices must be in [" + std::to_string(-dim) + ", " + std::to_string(dim) +
         ") for axis " + std::to_string(axis) + "; got " + std::to_string(i);
}

// ScatterElements / ScatterND `reduction`: none (opset < 16 has only this), add and mul (16),
// max and min (18).
enum class ScatterReduction { kNone, kAdd, kMul, kMax, kMin };

struct ScatterAttrs : ir::OpAttrs {
  int64_t axis = 0;  // ScatterElements only, as written (may be negative)
  ScatterReduction reduction = ScatterReduction::kNone;
};

// Parses and validates `reduction` for the node's opset.
inline StatusOr<ScatterReduction> ParseScatterReduction(const ir::Node& node) {
  const std::string r = node.GetString("reduction", "none");
  struct Entry {
    const char* name;
    ScatterReduction value;
    int since;
  };
  static const Entry kEntries[] = {{"none", ScatterReduction::kNone, 1},
                                   {"add", ScatterReduction::kAdd, 16},
                                   {"mul", ScatterReduction::kMul, 16},
                                   {"max", ScatterReduction::kMax, 18},
                                   {"min", ScatterReduction::kMin, 18}};
  for (const Entry& e : kEntries)
    if (r == e.name) {
      if (node.opset < e.since)
        return ir::AttrError(node, "reduction '" + r +
                                       "' needs opset >= " + std::to_string(e.since) +
                                       "; got opset " + std::to_string(node.opset));
      return e.value;
    }
  return ir::AttrError(node, "reduction must be one of none, add, mul, max, min; got '" + r + "'");
}

// dst = reduction(dst, v). Integers wrap on overflow; bool add/max is or, mul/min is and.
template <typename T>
void ApplyScatter(ScatterReduction r, T& dst, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (r == ScatterReduction::kNone) dst = v;
    if (r == ScatterReduction::kAdd || r == ScatterReduction::kMax) dst = dst || v;
    if (r == ScatterReduction::kMul || r == ScatterReduction::kMin) dst = dst && v;
  } else {
    switch (r) {
      case ScatterReduction::kNone:
        dst = v;
        break;
      case ScatterReduction::kAdd:
        dst = WrapAdd(dst, v);
        break;
      case ScatterReduction::kMul:
        dst = WrapMul(dst, v);
        break;
      case ScatterReduction::kMax:
        dst = std::max(dst, v);
        break;
      case ScatterReduction::kMin:
        dst = std::min(dst, v);
        break;
    }
  }
}

// ScatterElements' and ScatterND's input checks: data of a kiln dtype (numeric or bool),
// int64/int32 indices and updates of data's dtype, both present.
inline Status CheckScatterInputs(ir::InferContext& ctx) {
  KILN_RETURN_IF_ERROR(ExpectNumeric(ctx, 0, /*with_bool=*/true));
  if (!ctx.has_input(1) || !ctx.has_input(2))
    return ctx.Error("indices (input 1) and updates (input 2) are required; got none");
  KILN_RETURN_IF_ERROR(ctx.ExpectDtype(1, {DataType::kInt64, DataType::kInt32}));
  if (ctx.dtype(2) != ctx.dtype(0))
    return ctx.Error(std::string("updates must have data's dtype ") + DataTypeName(ctx.dtype(0)) +
                     "; got " + DataTypeName(ctx.dtype(2)));
  return OkStatus();
}

// GatherElements' and ScatterElements' indices (input 1) against data (input 0): data of rank
// >= 1, indices of the same rank, `axis` in [-rank, rank), and indices no larger than data in
// the dims other than axis (ONNX Runtime's rule).
inline Status CheckElementsIndices(ir::InferContext& ctx, int64_t axis) {
  const int64_t r = ctx.rank(0);
  if (r == 0) return ctx.Error("data must have rank >= 1; got a scalar");
  if (ctx.rank(1) != r)
    return ctx.Error("indices must have data's rank " + std::to_string(r) + "; got rank " +
                     std::to_string(ctx.rank(1)));
  if (axis < -r || axis >= r)
    return ctx.Error("axis must be in [" + std::to_string(-r) + ", " + std::to_string(r) +
                     "); got " + std::to_string(axis));
  if (axis < 0) axis += r;
  for (int64_t d = 0; d < r; ++d)
    if (d != axis && ctx.shape(1)[d] > ctx.shape(0)[d])
      return ctx.Error("indices dims other than axis must not exceed data's; got indices " +
                       ShapeToString(ctx.shape(1)) + " for data " + ShapeToString(ctx.shape(0)));
  return OkStatus();
}

}  // namespace kiln::ops
