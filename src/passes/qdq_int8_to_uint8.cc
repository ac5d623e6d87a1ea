// qdq_int8_to_uint8: an int8 activation with a non-zero zero point becomes the same activation in
// uint8. ONNX Runtime 1.32's quantize_static, with its defaults (int8 activations, asymmetric),
// writes QuantizeLinear -> DequantizeLinear pairs with int8 zero points such as -128 after a ReLU.
// Shifting every quantized value by 128 is exact:
//
//   clamp(round(x / s) + z, -128, 127) + 128 == clamp(round(x / s) + (z + 128), 0, 255)
//   (q - z) * s == ((q + 128) - (z + 128)) * s
//
// so a QuantizeLinear with an int8 zero point z != 0 whose every reader is a DequantizeLinear
// with the same scale and zero point constants gets the uint8 zero point z + 128, as do those
// readers. The int8 kernels then see what they run fastest: a ReLU output with uint8 zero point
// 0, which fuse_qdq_conv and fuse_qdq_matmul absorb into the product before it (it writes
// uint8 directly, no QuantizeLinear pass of its own), and inputs with a zero point that oneDNN
// reads as uint8 without the sign-bit flip an int8 one needs. Symmetric int8 (z == 0, kiln's own
// scheme) and anything else (per-channel zero points, another reader, a graph output) is left.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"

namespace kiln::passes {
namespace {

// A one-element int8 constant, its value.
bool Int8Scalar(const Tensor* t, int* value) {
  if (!IsScalarOf(t, {DataType::kInt8})) return false;
  *value = t->data<int8_t>()[0];
  return true;
}

// Two one-element float32 constants of one value.
bool SameFloatScalar(const Tensor* a, const Tensor* b) {
  return IsScalarOf(a, {DataType::kFloat}) && IsScalarOf(b, {DataType::kFloat}) &&
         a->data<float>()[0] == b->data<float>()[0];
}

class QdqInt8ToUint8Pass : public Pass {
 public:
  std::string name() const override { return "qdq_int8_to_uint8"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"QuantizeLinear"})) return false;
    GraphEditor ed(graph);
    int shifted = 0, readers = 0, absorbed_ready = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& q = ed.node(ni);
      if (!IsOnnxOp(q, "QuantizeLinear") || q.inputs.size() != 3 || q.outputs.size() != 1 ||
          q.GetInt("output_dtype", 0) != 0 || q.GetInt("saturate", 1) != 1)
        continue;
      int z = 0;
      const Tensor* scale = ed.ConstantOf(q.inputs[1]);
      if (!Int8Scalar(ed.ConstantOf(q.inputs[2]), &z) || z == 0 ||
          !IsScalarOf(scale, {DataType::kFloat}))
        continue;
      const int out = q.outputs[0];
      if (out < 0 || ed.IsGraphOutput(out) || ed.Consumers(out).empty()) continue;
      bool all_dq = true;
      for (int c : ed.Consumers(out)) {
        const ir::Node& d = ed.node(c);
        int dz = 0;
        all_dq = all_dq && IsOnnxOp(d, "DequantizeLinear") && d.inputs.size() == 3 &&
                 d.inputs[0] == out && d.GetInt("block_size", 0) == 0 &&
                 SameFloatScalar(ed.ConstantOf(d.inputs[1]), scale) &&
                 Int8Scalar(ed.ConstantOf(d.inputs[2]), &dz) && dz == z;
      }
      if (!all_dq) continue;
      Tensor zero = Tensor::Empty(DataType::kUInt8, ed.ConstantOf(q.inputs[2])->shape());
      zero.data<uint8_t>()[0] = static_cast<uint8_t>(z + 128);
      const int zv = ed.AddConstant(ed.value(q.inputs[2]).name + "_as_uint8", std::move(zero));
      for (int c : std::vector<int>(ed.Consumers(out))) {
        ed.SetInput(c, 2, zv);
        ++readers;
      }
      ed.SetInput(ni, 2, zv);
      ed.graph().values[out].dtype = DataType::kUInt8;
      absorbed_ready += z == -128;
      ++shifted;
    }
    if (shifted == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "moved " + std::to_string(shifted) +
               " int8 activations with a zero point to uint8 (zero point + 128; " +
               std::to_string(absorbed_ready) + " of them now with zero point 0), " +
               std::to_string(readers) + " DequantizeLinear readers with them";
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeQdqInt8ToUint8Pass() { return std::make_unique<QdqInt8ToUint8Pass>(); }

}  // namespace kiln::passes
