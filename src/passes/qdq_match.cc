// See qdq_match.h.
#include "passes/qdq_match.h"

#include <cstring>

namespace kiln::passes {

bool AllZero(const Tensor& t) {
  const char* p = static_cast<const char*>(t.raw());
  for (size_t i = 0; i < t.bytes(); ++i)
    if (p[i] != 0) return false;
  return true;
}

bool IsScalarOf(const Tensor* t, std::initializer_list<DataType> dtypes) {
  if (t == nullptr || t->numel() != 1) return false;
  for (DataType d : dtypes)
    if (t->dtype() == d) return true;
  return false;
}

bool SameScalar(const GraphEditor& ed, int a, int b) {
  if (a < 0 || b < 0) return false;
  const Tensor* x = ed.ConstantOf(a);
  const Tensor* y = ed.ConstantOf(b);
  if (x == nullptr || y == nullptr || x->numel() != 1 || y->numel() != 1 ||
      x->dtype() != y->dtype())
    return false;
  return std::memcmp(x->raw(), y->raw(), DataTypeSize(x->dtype())) == 0;
}

void FloatLeftovers::Decline(GraphEditor& ed, const ir::Node& n, int w_dq, const std::string& why) {
  declined_.push_back("'" + n.name + "' (" + why + ")");
  if (w_dq >= 0 && ed.alive(w_dq) && IsOnnxOp(ed.node(w_dq), "DequantizeLinear") &&
      FoldNode(ed, w_dq, /*max_growth_bytes=*/int64_t{1} << 40))
    ++folded_;
}

std::string FloatLeftovers::Summary() const {
  if (declined_.empty()) return "";
  std::string s = "; " + std::to_string(declined_.size()) + " left in float32:";
  for (size_t i = 0; i < declined_.size() && i < 3; ++i) s += " " + declined_[i];
  if (declined_.size() > 3) s += " ...";
  return s;
}

bool MatchQdqOperands(GraphEditor& ed, const ShapeProbe& probe, const ir::Node& n,
                      FloatLeftovers* left, QdqOperands* out) {
  if (n.inputs.size() < 2 || n.outputs.size() != 1 || n.outputs[0] < 0) return false;
  const int dx = ed.Producer(n.inputs[0]), dw = ed.Producer(n.inputs[1]);
  if (dx < 0 || dx == dw || !IsOnnxOp(ed.node(dx), "DequantizeLinear")) return false;
  if (dw < 0 || !IsOnnxOp(ed.node(dw), "DequantizeLinear")) {
    left->Decline(ed, n, -1, "its weight is not dequantized int8");
    return false;
  }
  if (ed.node(dx).GetInt("block_size", 0) != 0 || ed.node(dw).GetInt("block_size", 0) != 0) {
    left->Decline(ed, n, dw, "blocked quantization");
    return false;
  }
  const ir::Node& xn = ed.node(dx);
  const DataType xt = xn.inputs.size() >= 2 ? probe.dtype(xn.inputs[0]) : DataType::kUndefined;
  if (xt != DataType::kUInt8 && xt != DataType::kInt8) {
    left->Decline(ed, n, dw, "its input is not uint8/int8");
    return false;
  }
  *out = {dx, dw, xt};
  return true;
}

void RemoveIfUnread(GraphEditor& ed, int node) {
  if (node >= 0 && ed.alive(node) && ed.Consumers(ed.node(node).outputs[0]).empty() &&
      !ed.IsGraphOutput(ed.node(node).outputs[0]))
    ed.RemoveNode(node);
}

void RemoveUnreadDequantize(GraphEditor& ed, const QdqOperands& ops) {
  for (int d : {ops.x_dq, ops.w_dq}) RemoveIfUnread(ed, d);
}

}  // namespace kiln::passes
