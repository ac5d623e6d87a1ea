// What fuse_qdq_conv and fuse_qdq_matmul share: matching a product (Conv, FusedConv, MatMul,
// Gemm) whose input and weight come from DequantizeLinear, recording the ones left in float32 and
// why, and the clean-up after a fusion.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/shape_probe.h"

namespace kiln::passes {

// Every byte of `t` is 0 (zero points).
bool AllZero(const Tensor& t);
// `t` is a one-element constant of one of `dtypes`.
bool IsScalarOf(const Tensor* t, std::initializer_list<DataType> dtypes);
// Values `a` and `b` are constant one-element tensors of one dtype and value (a scale or zero
// point written and read again: fuse_qconv_add, fuse_qconv_dw).
bool SameScalar(const GraphEditor& ed, int a, int b);

// The DequantizeLinear nodes feeding a product's input (0) and weight (1), and Xq's type.
struct QdqOperands {
  int x_dq = -1, w_dq = -1;
  DataType x_type = DataType::kUndefined;
};

// Products with a dequantized input that stay float32, and why, for the pass summary. Decline
// also folds the product's weight DequantizeLinear (which fold_constants kept for the pass) to a
// float32 constant, as fold_constants would have: the float fusions of the optimizer's next
// round then see a constant weight (the execution plan would fold it too, but after them).
class FloatLeftovers {
 public:
  void Decline(GraphEditor& ed, const ir::Node& n, int w_dq, const std::string& why);
  int folded() const { return folded_; }
  // "" or "; N left in float32: 'name' (why) ..." (the first three named).
  std::string Summary() const;

 private:
  std::vector<std::string> declined_;
  int folded_ = 0;
};

// False, recording nothing, when input 0 of `n` does not come from a DequantizeLinear (no QDQ
// product). False after recording why in `left` when it does but the weight (input 1) is not
// dequantized or Xq is not uint8/int8. True with the operands otherwise.
bool MatchQdqOperands(GraphEditor& ed, const ShapeProbe& probe, const ir::Node& n,
                      FloatLeftovers* left, QdqOperands* out);

// Removes live node `node` when nothing reads its (first) output and it is no graph output.
void RemoveIfUnread(GraphEditor& ed, int node);

// After a fusion: removes the operands' DequantizeLinear nodes that nothing reads any more.
void RemoveUnreadDequantize(GraphEditor& ed, const QdqOperands& ops);

}  // namespace kiln::passes
