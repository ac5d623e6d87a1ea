// fuse_qdq_add: in QDQ models whose residual Add has Q/DQ on every side (ONNX Runtime's
// quantize_static quantizes Add's inputs and output; ResNets' skip connections)
//
//   Aq -> DequantizeLinear -> Add [-> Relu] -> QuantizeLinear -> Yq
//   Bq -> DequantizeLinear ---^
//
// the Add becomes kiln's QAdd (src/ops/quant/qadd.cc), which reads Aq and Bq and writes Yq in one
// pass: the float32 tensors in between, and their four passes over memory, are gone. Exact: QAdd's
// arithmetic is the unfused graph's. Conditions: both operands dequantized per tensor (one scale,
// one zero point or none, constants) from uint8/int8, one shape (no broadcasting); the Add's
// result read only by the QuantizeLinear (or by a Relu read only by it), per tensor, uint8/int8,
// and not a graph output. The DequantizeLinear nodes go when nothing else reads them.
//
// Also here, the same idea for MaxPool: DequantizeLinear (per tensor, scale > 0) -> MaxPool
// becomes MaxPool on the 8-bit values -> DequantizeLinear, and with a QuantizeLinear of the same
// scale and zero point after it (ONNX Runtime keeps MaxPool's input scale) MaxPool on the 8-bit
// values alone. Exact: dequantization is increasing, so the maximum commutes with it, and
// quantizing a dequantized value with the same scale and zero point gives it back. The same for
// ops that only move values (Split, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice,
// DepthToSpace, SpaceToDepth, and Resize / Upsample in mode nearest, outside
// tf_crop_and_resize): each output value is an input value. And
// for Concat, when every input is dequantized with one scale and zero point (shared scales): the
// Concat joins the 8-bit values.
//
// And for average pooling: DequantizeLinear (per tensor) -> AveragePool or GlobalAveragePool ->
// QuantizeLinear (per tensor, the pool's only reader) becomes kiln's QAveragePool
// (src/ops/quant/qpool.cc), which pools the 8-bit values and requantizes in one pass. Its
// reference kernel is the unfused graph's arithmetic; its oneDNN kernel may put a value one step
// away at a rounding tie. Left alone: an AveragePool that counts padded taps
// (count_include_pad) and pads, when X has a zero point (oneDNN pads with the code 0).
#include <memory>
#include <string>

#include "ops/quant/quant_common.h"
#include "passes/graph_edit.h"
#include "passes/pass.h"
#include "passes/qdq_match.h"
#include "passes/shape_probe.h"

namespace kiln::passes {
namespace {

// A per-tensor DequantizeLinear from uint8/int8: scale one float32 constant, zero point absent or
// one constant of X's type.
bool PerTensorDequantize(const GraphEditor& ed, const ShapeProbe& probe, int node) {
  if (node < 0) return false;
  const ir::Node& d = ed.node(node);
  if (!IsOnnxOp(d, "DequantizeLinear") || d.inputs.size() < 2 || d.outputs.size() != 1 ||
      d.GetInt("block_size", 0) != 0)
    return false;
  const DataType t = probe.dtype(d.inputs[0]);
  return ops::quant::Is8Bit(t) && IsScalarOf(ed.ConstantOf(d.inputs[1]), {DataType::kFloat}) &&
         (!d.HasInput(2) || IsScalarOf(ed.ConstantOf(d.inputs[2]), {t}));
}

// A per-tensor QuantizeLinear to uint8/int8 (zero point given, or none: uint8) reading `v`.
bool PerTensorQuantize(const GraphEditor& ed, int node, int v) {
  if (node < 0) return false;
  const ir::Node& q = ed.node(node);
  return IsOnnxOp(q, "QuantizeLinear") && q.inputs.size() >= 2 && q.inputs[0] == v &&
         q.outputs.size() == 1 && q.GetInt("block_size", 0) == 0 &&
         q.GetInt("output_dtype", 0) == 0 &&
         IsScalarOf(ed.ConstantOf(q.inputs[1]), {DataType::kFloat}) &&
         (!q.HasInput(2) ||
          IsScalarOf(ed.ConstantOf(q.inputs[2]), {DataType::kUInt8, DataType::kInt8}));
}

// The value read only by node `reader` (one use) and not a graph output.
bool OnlyFeeds(const GraphEditor& ed, int v, int* reader) {
  *reader = ed.SoleConsumer(v);
  return *reader >= 0 && !ed.IsGraphOutput(v);
}

// Ops that only move or pick values: on 8-bit values they give the quantized result exactly.
bool IsPassThrough(const ir::Node& n) {
  for (const char* op : {"MaxPool", "Split", "Resize", "Upsample", "Reshape", "Flatten", "Squeeze",
                         "Unsqueeze", "Transpose", "Slice", "DepthToSpace", "SpaceToDepth"})
    if (IsOnnxOp(n, op)) return true;
  return false;
}

float FloatOf(const GraphEditor& ed, int v) { return ed.ConstantOf(v)->data<float>()[0]; }

// The zero point of a per-tensor Q/DQ node as (dtype, value); absent: uint8 0.
std::pair<DataType, int> ZeroOf(const GraphEditor& ed, const ir::Node& n) {
  if (!n.HasInput(2)) return {DataType::kUInt8, 0};
  const Tensor* z = ed.ConstantOf(n.inputs[2]);
  return {z->dtype(),
          z->dtype() == DataType::kUInt8 ? z->data<uint8_t>()[0] : z->data<int8_t>()[0]};
}

// The zero point input of QuantizeLinear `q`; for one without (uint8, 0), a new constant.
int ZeroPointInput(GraphEditor& ed, const ir::Node& q) {
  if (q.HasInput(2)) return q.inputs[2];
  Tensor z = Tensor::Empty(DataType::kUInt8, {});
  z.data<uint8_t>()[0] = 0;
  return ed.AddConstant(ed.value(q.inputs[1]).name + "_zero_point", std::move(z));
}

class FuseQdqAddPass : public Pass {
 public:
  std::string name() const override { return "fuse_qdq_add"; }

  StatusOr<bool> Run(ir::Graph& graph) override {
    summary_.clear();
    if (!HasOnnxOp(graph, {"DequantizeLinear"}) || !HasOnnxOp(graph, {"QuantizeLinear"}))
      return false;
    const ShapeProbe probe = ShapeProbe::Run(graph);
    GraphEditor ed(graph);
    int adds = 0, relus = 0, pools = 0, concats = 0, moves = 0, requantized = 0, averages = 0;
    for (int ni = 0; ni < ed.num_nodes(); ++ni) {
      if (!ed.alive(ni)) continue;
      const ir::Node& n = ed.node(ni);
      if (IsOnnxOp(n, "QuantizeLinear")) {
        requantized += DropRequantize(ed, probe, ni);
        continue;
      }
      if (IsPassThrough(n)) {
        // Read `n` before the fusion: it may add nodes, which moves them (`n` then dangles; in
        // `x += f()` C++17 evaluates f() first).
        int& count = IsOnnxOp(n, "MaxPool") ? pools : moves;
        count += FusePassThrough(ed, probe, ni);
        continue;
      }
      if (IsOnnxOp(n, "Concat")) {
        concats += FuseConcat(ed, probe, ni);
        continue;
      }
      if (IsOnnxOp(n, "AveragePool") || IsOnnxOp(n, "GlobalAveragePool")) {
        averages += FuseAveragePool(graph, ed, probe, ni);
        continue;
      }
      if (!IsOnnxOp(n, "Add") || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
      const int da = ed.Producer(n.inputs[0]), db = ed.Producer(n.inputs[1]);
      if (!PerTensorDequantize(ed, probe, da) || !PerTensorDequantize(ed, probe, db) ||
          !probe.SameShape(n.inputs[0], n.inputs[1]))
        continue;
      int next = -1, relu = -1;
      int v = n.outputs[0];
      if (!OnlyFeeds(ed, v, &next)) continue;
      if (IsOnnxOp(ed.node(next), "Relu")) {
        relu = next;
        v = ed.node(relu).outputs[0];
        if (!OnlyFeeds(ed, v, &next)) continue;
      }
      if (!PerTensorQuantize(ed, next, v) || ed.IsGraphOutput(ed.node(next).outputs[0])) continue;
      if (!ImportKilnDomain(graph)) return false;
      const ir::Node& a = ed.node(da);
      const ir::Node& b = ed.node(db);
      const ir::Node& q = ed.node(next);
      const int y_zero = ZeroPointInput(ed, q);
      ir::Node f;
      f.name = n.name;
      f.op_type = "QAdd";
      f.domain = "kiln";
      f.opset = 1;
      if (relu >= 0) f.attrs["activation"] = StringAttr("Relu");
      f.inputs = {a.inputs[0], a.inputs[1], a.HasInput(2) ? a.inputs[2] : -1,
                  b.inputs[0], b.inputs[1], b.HasInput(2) ? b.inputs[2] : -1,
                  q.inputs[1], y_zero};
      f.outputs = q.outputs;
      ed.RemoveNode(next);
      if (relu >= 0) ed.RemoveNode(relu);
      ed.ReplaceNode(ni, std::move(f));
      RemoveIfUnread(ed, da);
      RemoveIfUnread(ed, db);
      ++adds;
      relus += relu >= 0;
    }
    if (adds + pools + concats + moves + requantized + averages == 0) return false;
    KILN_RETURN_IF_ERROR(ed.Commit());
    summary_ = "fused " + std::to_string(adds) +
               " DequantizeLinear+Add+QuantizeLinear groups into QAdd (int8 sums" +
               (relus ? ", " + std::to_string(relus) + " with their Relu" : std::string()) + ")";
    if (pools)
      summary_ += "; " + std::to_string(pools) +
                  " MaxPool after a DequantizeLinear now pool the 8-bit values";
    if (moves)
      summary_ += "; " + std::to_string(moves) +
                  " Split/Resize/Reshape/Transpose-like ops after a DequantizeLinear now move the "
                  "8-bit values";
    if (requantized)
      summary_ += "; " + std::to_string(requantized) +
                  " QuantizeLinear of a DequantizeLinear with its scale and zero point dropped";
    if (averages)
      summary_ += "; " + std::to_string(averages) +
                  " DequantizeLinear+AveragePool+QuantizeLinear groups fused into QAveragePool "
                  "(int8 average pooling)";
    if (concats)
      summary_ += "; " + std::to_string(concats) +
                  " Concat of DequantizeLinears with one scale now join the 8-bit values";
    return true;
  }

 private:
  // DequantizeLinear -> a pass-through op (MaxPool, Split, Resize/Upsample in mode nearest,
  // Reshape, Flatten, Squeeze, Unsqueeze, Transpose): the op on Xq. Then, per output, a
  // QuantizeLinear of the same scale and zero point that alone reads it goes (ONNX Runtime's and
  // kiln's shared-scale form: the op writes the 8-bit output directly); otherwise a copy of the
  // DequantizeLinear follows that output (NNCF's form, no QuantizeLinear after MaxPool: the
  // convolutions reading it then see a dequantized input and become int8 in the next round).
  static bool FusePassThrough(GraphEditor& ed, const ShapeProbe& probe, int ni) {
    const ir::Node& n = ed.node(ni);
    if (n.inputs.empty() || n.outputs.empty()) return false;
    const std::string& op = n.op_type;
    if (op == "MaxPool" && (n.outputs.size() != 1 || n.opset < 12)) return false;
    if (op != "Split" && n.outputs.size() != 1) return false;
    if (op == "Resize" || op == "Upsample") {
      if (n.GetString("mode", "nearest") != "nearest" ||
          n.GetString("coordinate_transformation_mode", "") == "tf_crop_and_resize")
        return false;
    }
    const int d = ed.Producer(n.inputs[0]);
    if (!PerTensorDequantize(ed, probe, d)) return false;
    for (int out : n.outputs)
      if (out < 0 || ed.IsGraphOutput(out)) return false;
    const ir::Node& dn = ed.node(d);
    if (op == "MaxPool" && !(FloatOf(ed, dn.inputs[1]) > 0.f)) return false;  // decreasing: no
    const int xq = dn.inputs[0];
    const DataType t = probe.dtype(xq);
    const ir::Node dq_copy = dn;              // the scale and zero point, for the outputs
    const size_t outputs = n.outputs.size();  // (AddNode may move the nodes: no `n` below)
    for (size_t o = 0; o < outputs; ++o) {
      const int out = ed.node(ni).outputs[o];
      const int q = ed.SoleConsumer(out);
      if (q >= 0 && PerTensorQuantize(ed, q, out) && !ed.IsGraphOutput(ed.node(q).outputs[0]) &&
          FloatOf(ed, dq_copy.inputs[1]) == FloatOf(ed, ed.node(q).inputs[1]) &&
          ZeroOf(ed, dq_copy) == ZeroOf(ed, ed.node(q)) && ZeroOf(ed, ed.node(q)).first == t) {
        const int yq = ed.node(q).outputs[0];
        ed.RemoveNode(q);
        ed.SetOutput(ni, static_cast<int>(o), yq);
        continue;
      }
      ir::Node after = dq_copy;  // the same scale and zero point, now on the 8-bit output
      after.name = ed.UniqueName(ed.node(ni).name + "_DequantizeLinear");
      const int q8 = ed.AddValue(ed.value(out).name + "_quantized", t, std::nullopt);
      after.inputs[0] = q8;
      after.outputs = {out};
      ed.SetOutput(ni, static_cast<int>(o), q8);
      ed.AddNode(std::move(after));
    }
    ed.SetInput(ni, 0, xq);
    RemoveIfUnread(ed, d);
    return true;
  }

  // DequantizeLinear -> AveragePool / GlobalAveragePool -> QuantizeLinear: one QAveragePool.
  static bool FuseAveragePool(ir::Graph& graph, GraphEditor& ed, const ShapeProbe& probe, int ni) {
    const ir::Node& n = ed.node(ni);
    if (n.inputs.empty() || n.outputs.size() != 1) return false;
    const int d = ed.Producer(n.inputs[0]);
    int q = -1;
    if (!PerTensorDequantize(ed, probe, d) || !OnlyFeeds(ed, n.outputs[0], &q) ||
        !PerTensorQuantize(ed, q, n.outputs[0]) || ed.IsGraphOutput(ed.node(q).outputs[0]))
      return false;
    const ir::Node& dn = ed.node(d);
    const ir::Node& qn = ed.node(q);
    if (!(FloatOf(ed, dn.inputs[1]) > 0.f) || !(FloatOf(ed, qn.inputs[1]) > 0.f)) return false;
    if (n.op_type == "AveragePool" && n.GetInt("count_include_pad", 0) != 0 &&
        ZeroOf(ed, dn).second != 0) {
      bool pads = n.GetString("auto_pad", "NOTSET") != "NOTSET" &&
                  n.GetString("auto_pad", "NOTSET") != "VALID";
      for (int64_t p : n.GetInts("pads")) pads = pads || p != 0;
      if (pads) return false;
    }
    if (!ImportKilnDomain(graph)) return false;
    const int y_zero = ZeroPointInput(ed, qn);
    ir::Node f;
    f.name = n.name;
    f.op_type = "QAveragePool";
    f.domain = "kiln";
    f.opset = 1;
    f.attrs = n.attrs;
    f.attrs["pool"] = StringAttr(n.op_type);
    f.attrs["pool_opset"] = IntAttr(n.opset);
    f.inputs = {dn.inputs[0], dn.inputs[1], dn.HasInput(2) ? dn.inputs[2] : -1, qn.inputs[1],
                y_zero};
    f.outputs = qn.outputs;
    ed.RemoveNode(q);
    ed.ReplaceNode(ni, std::move(f));
    RemoveIfUnread(ed, d);
    return true;
  }

  // QuantizeLinear(DequantizeLinear(Xq)) with the same scale, zero point and type gives Xq back
  // (each value is an integer multiple of the scale, divided by it again): its readers read Xq.
  // Other readers of the dequantized value keep it (a Concat whose output a Shape also reads).
  static bool DropRequantize(GraphEditor& ed, const ShapeProbe& probe, int ni) {
    const ir::Node& q = ed.node(ni);
    if (q.inputs.empty() || q.outputs.size() != 1) return false;
    const int d = ed.Producer(q.inputs[0]);
    if (!PerTensorDequantize(ed, probe, d) || !PerTensorQuantize(ed, ni, q.inputs[0]) ||
        ed.IsGraphOutput(q.outputs[0]))
      return false;
    const ir::Node& dn = ed.node(d);
    const DataType t = probe.dtype(dn.inputs[0]);
    if (!(FloatOf(ed, dn.inputs[1]) > 0.f) ||
        FloatOf(ed, dn.inputs[1]) != FloatOf(ed, q.inputs[1]) || ZeroOf(ed, dn) != ZeroOf(ed, q) ||
        ZeroOf(ed, q).first != t)
      return false;
    const int xq = dn.inputs[0], yq = q.outputs[0];
    ed.RemoveNode(ni);
    ed.ReplaceUses(yq, xq);
    RemoveIfUnread(ed, d);
    return true;
  }

  // Every input of a Concat dequantized per tensor from the same 8-bit type with the same scale
  // and zero point (shared scales: NNCF's unified ones, `kiln quantize`'s): the Concat joins the
  // 8-bit values. As for MaxPool, a QuantizeLinear of that scale and zero point alone reading the
  // result goes; otherwise one DequantizeLinear follows the Concat. Exact: (de)quantization is
  // elementwise with the same constants on every input, so it commutes with the copy.
  static bool FuseConcat(GraphEditor& ed, const ShapeProbe& probe, int ni) {
    const ir::Node& n = ed.node(ni);
    const int out = n.outputs.size() == 1 ? n.outputs[0] : -1;
    if (n.inputs.empty() || out < 0 || ed.IsGraphOutput(out) || ed.Consumers(out).empty())
      return false;
    std::vector<int> dqs;
    for (int v : n.inputs) {
      const int d = ed.Producer(v);
      if (!PerTensorDequantize(ed, probe, d)) return false;
      dqs.push_back(d);
    }
    const ir::Node& d0 = ed.node(dqs[0]);
    const DataType t = probe.dtype(d0.inputs[0]);
    for (int d : dqs) {
      const ir::Node& dn = ed.node(d);
      if (probe.dtype(dn.inputs[0]) != t ||
          FloatOf(ed, dn.inputs[1]) != FloatOf(ed, d0.inputs[1]) ||
          ZeroOf(ed, dn) != ZeroOf(ed, d0))
        return false;
    }
    const int q = ed.SoleConsumer(out);
    if (q >= 0 && PerTensorQuantize(ed, q, out) && !ed.IsGraphOutput(ed.node(q).outputs[0]) &&
        FloatOf(ed, d0.inputs[1]) == FloatOf(ed, ed.node(q).inputs[1]) &&
        ZeroOf(ed, d0) == ZeroOf(ed, ed.node(q)) && ZeroOf(ed, d0).first == t) {
      const int yq = ed.node(q).outputs[0];
      ed.RemoveNode(q);
      for (size_t k = 0; k < dqs.size(); ++k)
        ed.SetInput(ni, static_cast<int>(k), ed.node(dqs[k]).inputs[0]);
      ed.SetOutput(ni, 0, yq);
      for (int d : dqs) RemoveIfUnread(ed, d);
      return true;
    }
    for (size_t k = 1; k < dqs.size(); ++k)
      ed.SetInput(ni, static_cast<int>(k), ed.node(dqs[k]).inputs[0]);
    const bool moved = MoveDequantizeAfter(ed, probe, ni, dqs[0]);
    for (size_t k = 1; k < dqs.size(); ++k) RemoveIfUnread(ed, dqs[k]);
    return moved;
  }

  // Node `ni` (output 0 float, read by someone) now reads DequantizeLinear `d`'s 8-bit input
  // (input 0) and writes 8-bit values; `d`'s copy dequantizes them into the old output.
  static bool MoveDequantizeAfter(GraphEditor& ed, const ShapeProbe& probe, int ni, int d) {
    const ir::Node& n = ed.node(ni);
    const int out = n.outputs[0];
    const ir::Node& dn = ed.node(d);
    const int xq = dn.inputs[0];
    ir::Node after = dn;  // the same scale and zero point, now on the node's 8-bit output
    after.name = ed.UniqueName(n.name + "_DequantizeLinear");
    const int q8 = ed.AddValue(ed.value(out).name + "_quantized", probe.dtype(xq), std::nullopt);
    after.inputs[0] = q8;
    after.outputs = {out};
    ed.SetInput(ni, 0, xq);
    ed.SetOutput(ni, 0, q8);
    ed.AddNode(std::move(after));
    RemoveIfUnread(ed, d);
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> MakeFuseQdqAddPass() { return std::make_unique<FuseQdqAddPass>(); }

}  // namespace kiln::passes
