// The kernel cases `kiln selftest` runs (selftest.h): one small graph per case, weights and inputs
// seeded, shapes chosen to hit the edges each kernel handles (odd sizes, padding, strides,
// groups, broadcasts, ceil-mode windows) and the fusions the optimizer makes (Conv + bias +
// activation + residual, MatMul + bias).
#include <random>

#include "onnx/model_builder.h"
#include "selftest.h"

namespace kiln::cli {

namespace {

using onnxio::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

std::vector<float> Random(int64_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void Weight(ModelBuilder& b, const std::string& name, const std::vector<int64_t>& dims,
            uint32_t seed) {
  b.FloatInit(name, dims, Random(Count(dims), seed, -0.5f, 0.5f));
}

// A conv case: x [1,c,h,w] -> Conv(k x k, stride, pad, group, dilation) [-> extra].
std::string ConvModel(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                      int64_t group, int64_t dilation, const std::string& extra) {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, c, hw, hw});
  Weight(b, "w", {m, c / group, k, k}, 11);
  Weight(b, "bias", {m}, 12);
  auto& conv = b.Node("Conv", {"x", "w", "bias"}, {extra.empty() ? "y" : "c"});
  ModelBuilder::IntsAttr(conv, "kernel_shape", {k, k});
  ModelBuilder::IntsAttr(conv, "strides", {stride, stride});
  ModelBuilder::IntsAttr(conv, "pads", {pad, pad, pad, pad});
  ModelBuilder::IntsAttr(conv, "dilations", {dilation, dilation});
  ModelBuilder::IntAttr(conv, "group", group);
  const int64_t out = (hw + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
  if (extra == "relu") {
    b.Node("Relu", {"c"}, {"y"});
  } else if (extra == "residual_relu") {
    b.Input("z", kF32, {2, m, out, out});
    b.Node("Add", {"c", "z"}, {"s"});
    b.Node("Relu", {"s"}, {"y"});
  } else if (extra == "relu6") {
    b.FloatInit("lo", {}, {0.f});
    b.FloatInit("hi", {}, {6.f});
    b.Node("Clip", {"c", "lo", "hi"}, {"y"});
  } else if (extra == "silu") {
    b.Node("Sigmoid", {"c"}, {"sg"});
    b.Node("Mul", {"c", "sg"}, {"y"});
  }
  b.Output("y", kF32, {2, m, out, out});
  return b.Bytes();
}

std::string Unary(const std::string& op, const std::vector<int64_t>& dims) {
  ModelBuilder b(op == "HardSwish" ? 14 : 13);  // HardSwish exists from opset 14
  b.Input("x", kF32, dims).Output("y", kF32, dims);
  b.Node(op, {"x"}, {"y"});
  return b.Bytes();
}

std::string Binary(const std::string& op, const std::vector<int64_t>& a,
                   const std::vector<int64_t>& bdims, const std::vector<int64_t>& out) {
  ModelBuilder b(13);
  b.Input("a", kF32, a).Input("b", kF32, bdims).Output("y", kF32, out);
  b.Node(op, {"a", "b"}, {"y"});
  return b.Bytes();
}

std::string Pool(const std::string& op, int64_t k, int64_t stride, int64_t pad, bool ceil,
                 bool count_include_pad, int64_t hw, int64_t out) {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 3, hw, hw}).Output("y", kF32, {2, 3, out, out});
  auto& n = b.Node(op, {"x"}, {"y"});
  ModelBuilder::IntsAttr(n, "kernel_shape", {k, k});
  ModelBuilder::IntsAttr(n, "strides", {stride, stride});
  ModelBuilder::IntsAttr(n, "pads", {pad, pad, pad, pad});
  ModelBuilder::IntAttr(n, "ceil_mode", ceil ? 1 : 0);
  if (op == "AveragePool") ModelBuilder::IntAttr(n, "count_include_pad", count_include_pad);
  return b.Bytes();
}

std::string MatMul(const std::vector<int64_t>& a, const std::vector<int64_t>& w,
                   const std::vector<int64_t>& out, bool bias) {
  ModelBuilder b(13);
  b.Input("a", kF32, a).Output("y", kF32, out);
  Weight(b, "w", w, 21);
  b.Node("MatMul", {"a", "w"}, {bias ? "p" : "y"});
  if (bias) {
    Weight(b, "bias", {w.back()}, 22);
    b.Node("Add", {"p", "bias"}, {"y"});
  }
  return b.Bytes();
}

std::string Gemm(bool trans_b, bool full_c) {
  ModelBuilder b(13);
  b.Input("a", kF32, {5, 7}).Output("y", kF32, {5, 9});
  Weight(b, "w", trans_b ? std::vector<int64_t>{9, 7} : std::vector<int64_t>{7, 9}, 31);
  Weight(b, "c", full_c ? std::vector<int64_t>{5, 9} : std::vector<int64_t>{9}, 32);
  auto& n = b.Node("Gemm", {"a", "w", "c"}, {"y"});
  ModelBuilder::IntAttr(n, "transB", trans_b ? 1 : 0);
  ModelBuilder::FloatAttr(n, "alpha", 0.75f);
  if (full_c) ModelBuilder::FloatAttr(n, "beta", 0.5f);
  return b.Bytes();
}

std::string Softmax(const std::string& op, int opset, int64_t axis) {
  ModelBuilder b(opset);
  b.Input("x", kF32, {3, 5, 7}).Output("y", kF32, {3, 5, 7});
  ModelBuilder::IntAttr(b.Node(op, {"x"}, {"y"}), "axis", axis);
  return b.Bytes();
}

std::string LayerNorm() {
  ModelBuilder b(17);
  b.Input("x", kF32, {2, 5, 48}).Output("y", kF32, {2, 5, 48});
  Weight(b, "g", {48}, 41);
  Weight(b, "beta", {48}, 42);
  ModelBuilder::FloatAttr(b.Node("LayerNormalization", {"x", "g", "beta"}, {"y"}), "epsilon",
                          1e-5f);
  return b.Bytes();
}

std::string Layout() {  // Transpose, Concat, Flatten, Reshape in one graph
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 3, 4, 5}).Input("z", kF32, {2, 4, 5, 2}).Output("y", kF32, {2, 100});
  ModelBuilder::IntsAttr(b.Node("Transpose", {"x"}, {"t"}), "perm", {0, 2, 3, 1});
  ModelBuilder::IntAttr(b.Node("Concat", {"t", "z"}, {"c"}), "axis", 3);
  b.Int64Init("shape", {2}, {2, 100});
  b.Node("Reshape", {"c", "shape"}, {"y"});
  return b.Bytes();
}

std::string SliceAndPad() {  // Slice with a negative step, then a constant Pad that also crops
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 3, 9, 8}).Output("y", kF32, {2, 3, 6, 5});
  b.Int64Init("starts", {2}, {7, 1});
  b.Int64Init("ends", {2}, {0, 8});
  b.Int64Init("axes", {2}, {2, 3});
  b.Int64Init("steps", {2}, {-2, 2});
  b.Node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"});  // [2,3,4,4]
  b.Int64Init("pads", {8}, {0, 0, 1, 2, 0, 0, 1, -1});
  b.FloatInit("value", {}, {0.5f});
  b.Node("Pad", {"s", "pads", "value"}, {"y"});
  return b.Bytes();
}

}  // namespace

std::vector<SelftestCase> SelftestCases() {
  std::vector<SelftestCase> c;
  c.push_back({"conv 3x3 pad 1", ConvModel(8, 16, 11, 3, 1, 1, 1, 1, "")});
  c.push_back({"conv 3x3 stride 2 + relu", ConvModel(8, 12, 13, 3, 2, 1, 1, 1, "relu")});
  c.push_back({"conv 1x1 + residual + relu", ConvModel(16, 24, 7, 1, 1, 0, 1, 1, "residual_relu")});
  c.push_back({"conv depthwise 3x3 + relu6", ConvModel(16, 16, 9, 3, 1, 1, 16, 1, "relu6")});
  c.push_back({"conv grouped dilated + silu", ConvModel(8, 8, 12, 3, 1, 2, 2, 2, "silu")});
  c.push_back({"conv 7x7 stride 2 pad 3", ConvModel(3, 8, 23, 7, 2, 3, 1, 1, "")});
  c.push_back({"matmul 2-D", MatMul({6, 10}, {10, 12}, {6, 12}, false)});
  c.push_back({"matmul batched A", MatMul({2, 3, 6, 10}, {10, 12}, {2, 3, 6, 12}, false)});
  c.push_back({"matmul + bias (fused)", MatMul({4, 6, 10}, {10, 12}, {4, 6, 12}, true)});
  c.push_back({"gemm transB row bias", Gemm(true, false)});
  c.push_back({"gemm full C beta 0.5", Gemm(false, true)});
  c.push_back({"maxpool 3x3 s2 p1", Pool("MaxPool", 3, 2, 1, false, false, 13, 7)});
  c.push_back({"maxpool 2x2 s2 ceil", Pool("MaxPool", 2, 2, 0, true, false, 9, 5)});
  c.push_back({"avgpool 3x3 s2 p1 excl pad", Pool("AveragePool", 3, 2, 1, false, false, 12, 6)});
  c.push_back({"avgpool 3x3 s2 p1 incl pad ceil", Pool("AveragePool", 3, 2, 1, true, true, 12, 7)});
  c.push_back({"global average pool", Unary("GlobalAveragePool", {2, 5, 7, 7})});
  c.push_back({"global max pool", Unary("GlobalMaxPool", {2, 5, 3, 9})});
  c.push_back({"softmax axis -1", Softmax("Softmax", 13, -1)});
  c.push_back({"softmax axis 1", Softmax("Softmax", 13, 1)});
  c.push_back({"logsoftmax opset 11", Softmax("LogSoftmax", 11, 1)});
  c.push_back({"layer normalization", LayerNorm()});
  c.push_back({"transpose, concat, reshape", Layout()});
  c.push_back({"slice step -2, pad (crop)", SliceAndPad()});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Erf",
                         "Exp", "Neg", "Abs"})
    c.push_back({std::string("unary ") + op, Unary(op, {3, 7, 11})});
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) {
    SelftestCase pc{std::string("unary ") + op, Unary(op, {3, 7, 11})};
    pc.positive_inputs = true;
    c.push_back(pc);
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    c.push_back({std::string("binary ") + op + " per-channel",
                 Binary(op, {2, 3, 4, 5}, {1, 3, 1, 1}, {2, 3, 4, 5})});
  c.push_back({"binary Add rank mismatch", Binary("Add", {2, 3, 4, 5}, {4, 1}, {2, 3, 4, 5})});
  c.push_back({"binary Mul both broadcast", Binary("Mul", {2, 1, 5}, {3, 1}, {2, 3, 5})});
  SelftestCase pow{"binary Pow", Binary("Pow", {3, 4}, {4}, {3, 4})};
  pow.positive_inputs = true;
  c.push_back(pow);
  return c;
}

}  // namespace kiln::cli
