// See lower_float16.h. Also covers the keep_io_types form converters write (float32 inputs and
// outputs around a float16 body): its Casts to float16 become float32 to float32 copies.
#include "passes/lower_float16.h"

#include "core/half.h"
#include "passes/graph_edit.h"

namespace kiln::passes {
namespace {

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

Tensor ToFloat32(const Tensor& t) {
  Tensor out = Tensor::Empty(DataType::kFloat, t.shape());
  const auto* src = static_cast<const uint16_t*>(t.raw());
  float* dst = out.data<float>();
  const bool bf16 = t.dtype() == DataType::kBFloat16;
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf16 ? Bf16ToFloat(src[i]) : HalfToFloat(src[i]);
  return out;
}

}  // namespace

Status LowerHalfFloats(ir::Graph& graph, std::string* what) {
  bool any = false;
  for (const ir::Value& v : graph.values) any = any || IsHalf(v.dtype);
  for (const ir::Node& n : graph.nodes)
    for (const auto& [name, a] : n.attrs)
      any = any || (a.type == ir::Attribute::Type::kTensor && IsHalf(a.t.dtype()));
  if (!any) return OkStatus();

  GraphEditor ed(graph);
  int weights = 0, casts_in = 0, casts_out = 0, retyped = 0;
  const int original_nodes = ed.num_nodes();
  // Node attributes: tensors (Constant, ConstantOfShape) and target types (Cast, EyeLike).
  for (int i = 0; i < original_nodes; ++i) {
    ir::Node& n = ed.mutable_node(i);
    for (auto& [name, a] : n.attrs) {
      if (a.type == ir::Attribute::Type::kTensor && IsHalf(a.t.dtype())) {
        a.t = ToFloat32(a.t);
        ++weights;
      }
      if (a.type == ir::Attribute::Type::kInt && (name == "to" || name == "dtype") &&
          IsHalf(static_cast<DataType>(a.i)) && (n.op_type == "Cast" || n.op_type == "EyeLike")) {
        a.i = static_cast<int64_t>(DataType::kFloat);
        ++retyped;
      }
    }
  }
  const size_t original_values = graph.values.size();
  for (size_t id = 0; id < original_values; ++id) {
    const int v = static_cast<int>(id);
    const DataType dt = graph.values[id].dtype;
    if (!IsHalf(dt)) continue;
    if (graph.values[id].constant) {
      if (ed.IsGraphOutput(v)) continue;  // a weight that is also an output keeps its type
      ed.MakeConstant(v, ToFloat32(*graph.values[id].constant));
      ++weights;
      continue;
    }
    if (ed.IsGraphInput(v)) {
      if (ed.IsGraphOutput(v)) continue;  // passed straight through: nothing computes on it
      // The caller's float16 tensor, cast once to the float32 value every reader gets.
      const int f32 =
          ed.AddValue(graph.values[id].name + "_f32", DataType::kFloat, graph.values[id].shape);
      ed.ReplaceUses(v, f32);
      ed.AddNode(CastNode(graph, ed.UniqueName(graph.values[id].name + "_to_float32"), v, f32,
                          DataType::kFloat));
      ++casts_in;
      continue;
    }
    if (ed.IsGraphOutput(v) && ed.Producer(v) >= 0) {
      // Computed in float32 into a new value; a Cast back makes the declared output.
      const int producer = ed.Producer(v);
      const int f32 =
          ed.AddValue(graph.values[id].name + "_f32", DataType::kFloat, graph.values[id].shape);
      ed.ReplaceUses(v, f32);
      const ir::Node& p = ed.node(producer);
      for (size_t slot = 0; slot < p.outputs.size(); ++slot)
        if (p.outputs[slot] == v) ed.SetOutput(producer, slot, f32);
      ed.AddNode(CastNode(graph, ed.UniqueName(graph.values[id].name + "_to_" + DataTypeName(dt)),
                          f32, v, dt));
      ++casts_out;
      continue;
    }
    graph.values[id].dtype = DataType::kFloat;  // an intermediate
    ++retyped;
  }
  KILN_RETURN_IF_ERROR(ed.Commit());
  if (what != nullptr)
    *what = "float16/bfloat16 computed as float32: " + std::to_string(weights) +
            " weights converted, " + std::to_string(casts_in) + " input and " +
            std::to_string(casts_out) + " output casts added, " + std::to_string(retyped) +
            " values and cast targets retyped";
  return OkStatus();
}

}  // namespace kiln::passes
