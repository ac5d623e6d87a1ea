// The kernel cases `kiln selftest` runs (kiln/diagnostics.h, SelfTestCases): one small graph per
// case, weights and inputs seeded, shapes chosen to hit the edges each kernel handles (odd sizes,
// padding, strides, groups, broadcasts, ceil-mode windows) and the fusions the optimizer makes
// (Conv + bias + activation + residual, MatMul + bias).
#include <onnx/onnx_pb.h>

#include <functional>
#include <random>
#include <set>

#include "kiln/diagnostics.h"
#include "onnx/model_builder.h"

namespace kiln {

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

// ConvTranspose k x k, stride, pad, output_padding, group, with bias: x [2, c, hw, hw].
std::string ConvTranspose(int64_t c, int64_t m, int64_t hw, int64_t k, int64_t stride, int64_t pad,
                          int64_t out_pad, int64_t group) {
  ModelBuilder b(13);
  const int64_t out = stride * (hw - 1) + out_pad + k - 2 * pad;
  b.Input("x", kF32, {2, c, hw, hw}).Output("y", kF32, {2, m, out, out});
  Weight(b, "w", {c, m / group, k, k}, 51);
  Weight(b, "bias", {m}, 52);
  auto& n = b.Node("ConvTranspose", {"x", "w", "bias"}, {"y"});
  ModelBuilder::IntsAttr(n, "kernel_shape", {k, k});
  ModelBuilder::IntsAttr(n, "strides", {stride, stride});
  ModelBuilder::IntsAttr(n, "pads", {pad, pad, pad, pad});
  ModelBuilder::IntsAttr(n, "output_padding", {out_pad, out_pad});
  ModelBuilder::IntAttr(n, "group", group);
  return b.Bytes();
}

std::string Unary(const std::string& op, const std::vector<int64_t>& dims) {
  // HardSwish exists from opset 14, Gelu from 20.
  ModelBuilder b(op == "Gelu" ? 20 : op == "HardSwish" ? 14 : 13);
  b.Input("x", kF32, dims).Output("y", kF32, dims);
  b.Node(op, {"x"}, {"y"});
  return b.Bytes();
}

// PyTorch's erf-form GELU at opset 13 on an input, which fuse_gelu turns into one kiln.Gelu.
std::string GeluErfForm(const std::vector<int64_t>& dims) {
  ModelBuilder b(13);
  b.Input("x", kF32, dims).Output("y", kF32, dims);
  b.GeluErfForm("x", "y");
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

// Both operands are inputs (attention's Q x K^T): no weight to prepack.
std::string MatMulOfInputs(const std::vector<int64_t>& a, const std::vector<int64_t>& b2,
                           const std::vector<int64_t>& out) {
  ModelBuilder b(13);
  b.Input("a", kF32, a).Input("b", kF32, b2).Output("y", kF32, out);
  b.Node("MatMul", {"a", "b"}, {"y"});
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

std::string BatchNorm() {  // inference BatchNormalization on its own (not after a Conv)
  ModelBuilder b(15);
  b.Input("x", kF32, {2, 6, 5, 7}).Output("y", kF32, {2, 6, 5, 7});
  Weight(b, "scale", {6}, 43);
  Weight(b, "bias", {6}, 44);
  Weight(b, "mean", {6}, 45);
  b.FloatInit("var", {6}, Random(6, 46, 0.5f, 1.5f));
  b.Node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
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

std::string SliceThirds() {  // attention's Q/K/V split: three Slices of the last axis
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 5, 96}).Output("y", kF32, {2, 5, 32});
  b.Int64Init("axes", {1}, {-1});
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    b.Int64Init("s" + n, {1}, {32 * i});
    b.Int64Init("e" + n, {1}, {32 * i + 32});
    b.Node("Slice", {"x", "s" + n, "e" + n, "axes"}, {"q" + n});
  }
  b.Node("Add", {"q0", "q1"}, {"a"});
  b.Node("Mul", {"a", "q2"}, {"y"});
  return b.Bytes();
}

std::string Split() {  // Split-13 with sizes as an input, along the channel axis
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 7, 3, 4}).Output("a", kF32, {2, 2, 3, 4}).Output("c", kF32, {2, 5, 3, 4});
  b.Int64Init("sizes", {2}, {2, 5});
  ModelBuilder::IntAttr(b.Node("Split", {"x", "sizes"}, {"a", "c"}), "axis", 1);
  return b.Bytes();
}

std::string Reshapes() {  // Flatten, Unsqueeze, Squeeze, Identity, Dropout (inference)
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 3, 4}).Output("y", kF32, {2, 12});
  ModelBuilder::IntAttr(b.Node("Flatten", {"x"}, {"f"}), "axis", 1);
  b.Int64Init("ax", {1}, {1});
  b.Node("Unsqueeze", {"f", "ax"}, {"u"});  // [2,1,12]
  b.Node("Identity", {"u"}, {"i"});
  b.Node("Squeeze", {"i", "ax"}, {"s"});
  b.Node("Dropout", {"s"}, {"y"});
  return b.Bytes();
}

std::string Upsample() {  // Upsample-9: scales input, legacy nearest
  ModelBuilder b(9);
  b.Input("x", kF32, {1, 2, 3, 4}).Output("y", kF32, {1, 2, 6, 12});
  b.FloatInit("scales", {4}, {1.f, 1.f, 2.f, 3.f});
  b.Node("Upsample", {"x", "scales"}, {"y"});
  return b.Bytes();
}

std::string Gather() {  // constant indices, negative ones included, along axis 1
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 5, 3}).Output("y", kF32, {2, 2, 2, 3});
  b.Int64Init("idx", {2, 2}, {4, -1, 0, -5});
  ModelBuilder::IntAttr(b.Node("Gather", {"x", "idx"}, {"y"}), "axis", 1);
  return b.Bytes();
}

std::string Reduce(const std::string& op, const std::vector<int64_t>& axes, bool keepdims,
                   const std::vector<int64_t>& out) {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 3, 4, 5}).Output("y", kF32, out);
  onnx::NodeProto* n = nullptr;
  if (op == "ReduceSum") {  // axes as an input from opset 13
    b.Int64Init("axes", {static_cast<int64_t>(axes.size())}, axes);
    n = &b.Node(op, {"x", "axes"}, {"y"});
  } else {
    n = &b.Node(op, {"x"}, {"y"});
    ModelBuilder::IntsAttr(*n, "axes", axes);
  }
  ModelBuilder::IntAttr(*n, "keepdims", keepdims ? 1 : 0);
  return b.Bytes();
}

// Resize-13 with scales (or sizes when `scales` is empty) on a [1,3,5,6] input.
std::string Resize(const std::string& mode, const std::string& coord, const std::string& nearest,
                   const std::vector<float>& scales, const std::vector<int64_t>& sizes) {
  ModelBuilder b(13);
  const std::vector<int64_t> out =
      sizes.empty() ? std::vector<int64_t>{1, 3, static_cast<int64_t>(5 * scales[2]),
                                           static_cast<int64_t>(6 * scales[3])}
                    : sizes;
  b.Input("x", kF32, {1, 3, 5, 6}).Output("y", kF32, out);
  b.FloatInit("roi", {0}, {});
  b.FloatInit("scales", {static_cast<int64_t>(scales.size())}, scales);
  std::vector<std::string> inputs = {"x", "roi", "scales"};
  if (!sizes.empty()) {
    b.Int64Init("sizes", {4}, sizes);
    inputs.push_back("sizes");
  }
  auto& n = b.Node("Resize", inputs, {"y"});
  ModelBuilder::StringAttr(n, "mode", mode);
  ModelBuilder::StringAttr(n, "coordinate_transformation_mode", coord);
  ModelBuilder::StringAttr(n, "nearest_mode", nearest);
  return b.Bytes();
}

}  // namespace

// ONNX Runtime's dynamic quantization of a MatMul: DynamicQuantizeLinear of the input, then
// MatMulInteger with full-range int8 weights and the run-time zero point, Cast, and the
// dequantizing Mul by the input's scale. `few_wide`: the weights within +-60 but for every 25th,
// as trained weights are (the clamped weights + sparse rest path on CPUs without VNNI).
std::string DynamicQuantMatMul(bool few_wide = false) {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 6, 40}).Output("y", kF32, {2, 6, 24});
  auto* wq = b.proto().mutable_graph()->add_initializer();
  wq->set_name("wq");
  wq->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {40, 24}) wq->add_dims(d);
  std::string raw;
  for (float v : Random(40 * 24, 35, -128.f, 127.f))
    raw.push_back(static_cast<char>(few_wide && raw.size() % 25 != 0 ? v * 60 / 128 : v));
  wq->set_raw_data(raw);
  b.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  b.Node("MatMulInteger", {"xq", "wq", "xz"}, {"acc"});
  ModelBuilder::IntAttr(b.Node("Cast", {"acc"}, {"accf"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"accf", "xs"}, {"y"});
  return b.Bytes();
}

// ONNX Runtime's dynamic quantization of a Conv: DynamicQuantizeLinear of the input, then
// ConvInteger with full-range int8 weights and the run-time zero point, Cast, and the
// dequantizing Mul by the input's scale.
std::string DynamicQuantConv() {
  ModelBuilder b(13);
  b.Input("x", kF32, {1, 24, 9, 9}).Output("y", kF32, {1, 16, 9, 9});
  auto* wq = b.proto().mutable_graph()->add_initializer();
  wq->set_name("wq");
  wq->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {16, 24, 3, 3}) wq->add_dims(d);
  std::string raw;
  for (float v : Random(16 * 24 * 9, 36, -128.f, 127.f)) raw.push_back(static_cast<char>(v));
  wq->set_raw_data(raw);
  b.Node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  ModelBuilder::IntsAttr(b.Node("ConvInteger", {"xq", "wq", "xz"}, {"acc"}), "pads", {1, 1, 1, 1});
  ModelBuilder::IntAttr(b.Node("Cast", {"acc"}, {"accf"}), "to", onnx::TensorProto::FLOAT);
  b.Node("Mul", {"accf", "xs"}, {"y"});
  return b.Bytes();
}

// An int8 QDQ convolution (Q -> DQ on the input, DQ of int8 weights per channel, bias, Relu)
// followed by a QDQ'd Gemm input: QConv's int8 kernel, the Q/DQ loops. The weights are even, so
// the halved weights oneDNN uses on CPUs without VNNI are exact. `x_zero`: the input's int8 zero
// point (not 0: the kernel feeds oneDNN uint8 with a source zero point).
std::string QdqConv(int x_zero = 0) {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 8, 9, 9});
  auto* wq = b.proto().mutable_graph()->add_initializer();
  wq->set_name("wq");
  wq->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {16, 8, 3, 3}) wq->add_dims(d);
  std::string raw;
  for (float v : Random(16 * 8 * 9, 31, -63.f, 63.f))
    raw.push_back(static_cast<char>(2 * static_cast<int>(v)));
  wq->set_raw_data(raw);
  b.FloatInit("sw", {16}, Random(16, 32, 0.001f, 0.004f));
  b.FloatInit("sx", {}, {1.f / 64});
  b.FloatInit("sy", {}, {1.f / 32});
  auto* zx = b.proto().mutable_graph()->add_initializer();
  zx->set_name("zx");
  zx->set_data_type(onnx::TensorProto::INT8);
  zx->set_raw_data(std::string(1, static_cast<char>(x_zero)));
  auto* zy = b.proto().mutable_graph()->add_initializer();
  zy->set_name("zy");
  zy->set_data_type(onnx::TensorProto::UINT8);
  zy->set_raw_data(std::string(1, '\0'));
  Weight(b, "bias", {16}, 33);
  Weight(b, "wg", {16 * 9 * 9, 10}, 34);
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  ModelBuilder::IntAttr(b.Node("DequantizeLinear", {"wq", "sw"}, {"wd"}), "axis", 0);
  ModelBuilder::IntsAttr(b.Node("Conv", {"xd", "wd", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c"}, {"r"});
  b.Node("Flatten", {"r"}, {"f"});
  b.Node("QuantizeLinear", {"f", "sy", "zy"}, {"fq"});
  b.Node("DequantizeLinear", {"fq", "sy", "zy"}, {"fd"});
  b.Node("Gemm", {"fd", "wg"}, {"y"});
  b.Output("y", kF32, {2, 10});
  return b.Bytes();
}

// An 8-bit initializer (`type`: onnx::TensorProto::INT8 or UINT8) from raw bytes.
void EightBitInit(ModelBuilder& b, const std::string& name, int type,
                  const std::vector<int64_t>& dims, const std::string& raw) {
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(raw);
}

// A residual block as ONNX Runtime's quantize_static writes it: Q/DQ around MaxPool (one scale),
// a QDQ convolution whose output is requantized with an int8 zero point (no activation), and an
// Add of two dequantized tensors quantized again (int8 zero point -128: the ReLU removed). The
// optimizer turns it into an int8 MaxPool and a QConvAdd (the QConv with its destination zero
// point and the QAdd in one oneDNN convolution; `--disable-pass fuse_qconv_add` keeps them apart).
std::string QdqResidual() {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 8, 9, 9});
  auto int8_init = [&](const std::string& name, std::vector<int64_t> dims, const std::string& raw) {
    EightBitInit(b, name, onnx::TensorProto::INT8, dims, raw);
  };
  std::string raw;
  for (float v : Random(8 * 8 * 9, 37, -63.f, 63.f))
    raw.push_back(static_cast<char>(2 * static_cast<int>(v)));
  int8_init("wq", {8, 8, 3, 3}, raw);
  int8_init("zx", {}, std::string(1, static_cast<char>(-3)));
  int8_init("zc", {}, std::string(1, static_cast<char>(16)));
  int8_init("zy", {}, std::string(1, static_cast<char>(-128)));
  b.FloatInit("sw", {}, {0.002f});
  b.FloatInit("sx", {}, {1.f / 64});
  b.FloatInit("sc", {}, {1.f / 40});
  b.FloatInit("sy", {}, {1.f / 32});
  Weight(b, "bias", {8}, 38);
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  auto& pool = b.Node("MaxPool", {"xd"}, {"p"});
  ModelBuilder::IntsAttr(pool, "kernel_shape", {3, 3});
  ModelBuilder::IntsAttr(pool, "pads", {1, 1, 1, 1});
  b.Node("QuantizeLinear", {"p", "sx", "zx"}, {"pq"});
  b.Node("DequantizeLinear", {"pq", "sx", "zx"}, {"pd"});
  b.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  ModelBuilder::IntsAttr(b.Node("Conv", {"pd", "wd", "bias"}, {"c"}), "pads", {1, 1, 1, 1});
  b.Node("QuantizeLinear", {"c", "sc", "zc"}, {"cq"});
  b.Node("DequantizeLinear", {"cq", "sc", "zc"}, {"cd"});
  b.Node("Add", {"cd", "pd"}, {"s"});
  b.Node("QuantizeLinear", {"s", "sy", "zy"}, {"sq"});
  b.Node("DequantizeLinear", {"sq", "sy", "zy"}, {"y"});
  b.Output("y", kF32, {2, 8, 9, 9});
  return b.Bytes();
}

// A MobileNetV2 block's first half in QDQ form: a 1x1 expansion (8 -> 24 channels) + ReLU6 whose
// uint8 output only a 3x3 depthwise convolution with stride 2 + ReLU6 reads. The optimizer turns
// the pair into one QConvDw (the depthwise convolution a oneDNN post-op of the 1x1 one;
// `--disable-pass fuse_qconv_dw` keeps them apart). Even 1x1 weights, exact when halved.
std::string QdqExpandDepthwise() {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 8, 10, 10});
  auto int8_init = [&](const std::string& name, std::vector<int64_t> dims, const std::string& raw) {
    EightBitInit(b, name, onnx::TensorProto::INT8, dims, raw);
  };
  auto uint8_zero = [&](const std::string& name) {
    EightBitInit(b, name, onnx::TensorProto::UINT8, {}, std::string(1, '\0'));
  };
  std::string w1, w2;
  for (float v : Random(24 * 8, 39, -63.f, 63.f))
    w1.push_back(static_cast<char>(2 * static_cast<int>(v)));
  for (float v : Random(24 * 9, 40, -127.f, 127.f))
    w2.push_back(static_cast<char>(static_cast<int>(v)));
  int8_init("w1q", {24, 8, 1, 1}, w1);
  int8_init("w2q", {24, 1, 3, 3}, w2);
  int8_init("zx", {}, std::string(1, '\0'));
  uint8_zero("za");
  uint8_zero("zy");
  b.FloatInit("sx", {}, {1.f / 64});
  b.FloatInit("sw1", {}, {0.004f});
  b.FloatInit("sw2", {}, {0.003f});
  b.FloatInit("sa", {}, {6.f / 255});
  b.FloatInit("sy", {}, {6.f / 255});
  b.FloatInit("lo", {}, {0.f});
  b.FloatInit("hi", {}, {6.f});
  Weight(b, "b1", {24}, 41);
  Weight(b, "b2", {24}, 42);
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  b.Node("DequantizeLinear", {"w1q", "sw1"}, {"w1"});
  b.Node("Conv", {"xd", "w1", "b1"}, {"c1"});
  b.Node("Clip", {"c1", "lo", "hi"}, {"a1"});
  b.Node("QuantizeLinear", {"a1", "sa", "za"}, {"aq"});
  b.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  b.Node("DequantizeLinear", {"w2q", "sw2"}, {"w2"});
  auto& dw = b.Node("Conv", {"ad", "w2", "b2"}, {"c2"});
  ModelBuilder::IntsAttr(dw, "pads", {1, 1, 1, 1});
  ModelBuilder::IntsAttr(dw, "strides", {2, 2});
  ModelBuilder::IntAttr(dw, "group", 24);
  b.Node("Clip", {"c2", "lo", "hi"}, {"a2"});
  b.Node("QuantizeLinear", {"a2", "sy", "zy"}, {"yq"});
  b.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  b.Output("y", kF32, {2, 24, 5, 5});
  return b.Bytes();
}

// Average pooling in QDQ form (ONNX Runtime's QLinearAveragePool, expanded): uint8 with zero
// point 128 in, a 3x3 window (9 taps) and a global pool (49), requantized at twice the resolution
// with zero point 120. The optimizer makes each a QAveragePool (oneDNN's int8 pooling with the
// requantization as a linear post-op). 2 * sum / 9 and 2 * sum / 49 are never within half a step
// of a rounding tie, so the int8 kernel and the reference round alike.
std::string QdqAveragePool() {
  ModelBuilder b(13);
  b.Input("x", kF32, {2, 16, 7, 7});
  EightBitInit(b, "zx", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(128)));
  EightBitInit(b, "zy", onnx::TensorProto::UINT8, {}, std::string(1, static_cast<char>(120)));
  b.FloatInit("sx", {}, {1.f / 32});
  b.FloatInit("sy", {}, {1.f / 64});
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  ModelBuilder::IntsAttr(b.Node("AveragePool", {"xd"}, {"p"}), "kernel_shape", {3, 3});
  b.Node("QuantizeLinear", {"p", "sy", "zy"}, {"pq"});
  b.Node("DequantizeLinear", {"pq", "sy", "zy"}, {"y"});
  b.Node("GlobalAveragePool", {"xd"}, {"g"});
  b.Node("QuantizeLinear", {"g", "sy", "zy"}, {"gq"});
  b.Node("DequantizeLinear", {"gq", "sy", "zy"}, {"y2"});
  b.Output("y", kF32, {2, 16, 5, 5});
  b.Output("y2", kF32, {2, 16, 1, 1});
  return b.Bytes();
}

// An int8 QDQ Gemm (uint8 input with zero point 128, as ONNX Runtime's asymmetric activations;
// int8 weights [N, K] per row, transB; bias; Relu): QMatMul's int8 kernel. The weights are even,
// so the halved weights used on CPUs without VNNI are exact.
std::string QdqGemm() {
  ModelBuilder b(13);
  b.Input("x", kF32, {4, 64});
  auto* wq = b.proto().mutable_graph()->add_initializer();
  wq->set_name("wq");
  wq->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : {12, 64}) wq->add_dims(d);
  std::string raw;
  for (float v : Random(12 * 64, 35, -63.f, 63.f))
    raw.push_back(static_cast<char>(2 * static_cast<int>(v)));
  wq->set_raw_data(raw);
  b.FloatInit("sw", {12}, Random(12, 36, 0.001f, 0.004f));
  b.FloatInit("sx", {}, {1.f / 64});
  auto* zx = b.proto().mutable_graph()->add_initializer();
  zx->set_name("zx");
  zx->set_data_type(onnx::TensorProto::UINT8);
  zx->set_raw_data(std::string(1, static_cast<char>(128)));
  Weight(b, "bias", {12}, 37);
  b.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  b.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  ModelBuilder::IntAttr(b.Node("DequantizeLinear", {"wq", "sw"}, {"wd"}), "axis", 0);
  ModelBuilder::IntAttr(b.Node("Gemm", {"xd", "wd", "bias"}, {"g"}), "transB", 1);
  b.Node("Relu", {"g"}, {"y"});
  b.Output("y", kF32, {4, 12});
  return b.Bytes();
}

// Control flow: a Loop (3 iterations) whose body holds an If reading the graph input two levels
// up (add x while i < 2, then halve), then a Scan summing the rows of the result: the subplan
// kernels against the interpreted bodies.
std::string ControlFlow() {
  using Body = ModelBuilder::Subgraph;
  constexpr int kBool = onnx::TensorProto::BOOL, kI64 = onnx::TensorProto::INT64;
  ModelBuilder b(13);
  b.Input("x", kF32, {4, 3});
  b.Int64Init("m", {}, {3});
  b.Int64Init("two", {}, {2});
  b.FloatInit("half", {}, {0.5f});
  b.FloatInit("zeros", {3}, {0.f, 0.f, 0.f});
  Body add_b, half_b, body, scan;
  add_b.Output("a", kF32, {4, 3}).Node("Add", {"s_in", "x"}, {"a"});
  half_b.Output("h", kF32, {4, 3}).Node("Mul", {"s_in", "half"}, {"h"});
  body.Input("i", kI64, {}).Input("cin", kBool, {}).Input("s_in", kF32, {4, 3});
  body.Output("cout", kBool, {}).Output("s_out", kF32, {4, 3});
  body.Node("Identity", {"cin"}, {"cout"});
  body.Node("Less", {"i", "two"}, {"early"});
  auto& branch = body.Node("If", {"early"}, {"s_out"});
  ModelBuilder::GraphAttr(branch, "then_branch", add_b);
  ModelBuilder::GraphAttr(branch, "else_branch", half_b);
  scan.Input("acc", kF32, {3}).Input("row", kF32, {3});
  scan.Output("acc_out", kF32, {3}).Output("partial", kF32, {3});
  scan.Node("Add", {"acc", "row"}, {"acc_out"});
  scan.Node("Relu", {"acc_out"}, {"partial"});
  b.Node("Greater", {"m", "two"}, {"go"});
  ModelBuilder::GraphAttr(b.Node("Loop", {"m", "go", "x"}, {"s"}), "body", body);
  auto& sc = b.Node("Scan", {"zeros", "s"}, {"sum", "y"});
  ModelBuilder::GraphAttr(sc, "body", scan);
  ModelBuilder::IntAttr(sc, "num_scan_inputs", 1);
  b.Output("sum", kF32, {3}).Output("y", kF32, {4, 3});
  return b.Bytes();
}

// A bidirectional LSTM, GRU or RNN over 4 steps with bias and initial state (the CPU's float
// loops; GRU in PyTorch's linear_before_reset form).
std::string Recurrent(const std::string& op) {
  ModelBuilder b(14);
  const int64_t seq = 4, batch = 2, in = 5, h = 6;
  const int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
  b.Input("x", kF32, {seq, batch, in}).Input("h0", kF32, {2, batch, h});
  if (op == "LSTM") b.Input("c0", kF32, {2, batch, h});
  Weight(b, "w", {2, gates * h, in}, 51);
  Weight(b, "r", {2, gates * h, h}, 52);
  Weight(b, "bias", {2, 2 * gates * h}, 53);
  std::vector<std::string> ins = {"x", "w", "r", "bias", "", "h0"};
  std::vector<std::string> outs = {"y", "yh"};
  if (op == "LSTM") {
    ins.push_back("c0");
    outs.push_back("yc");
  }
  auto& n = b.Node(op, ins, outs);
  ModelBuilder::StringAttr(n, "direction", "bidirectional");
  ModelBuilder::IntAttr(n, "hidden_size", h);
  if (op == "GRU") ModelBuilder::IntAttr(n, "linear_before_reset", 1);
  b.Output("y", kF32, {seq, 2, batch, h}).Output("yh", kF32, {2, batch, h});
  if (op == "LSTM") b.Output("yc", kF32, {2, batch, h});
  return b.Bytes();
}

// GridSample-16 on a [2,C,9,11] input through a [2,7,6,2] grid (the CPU's block loops; from 16
// channels with 4 taps or more, channels-last).
std::string GridSample(const std::string& mode, const std::string& padding, int64_t c = 5) {
  ModelBuilder b(16);
  b.Input("x", kF32, {2, c, 9, 11}).Input("grid", kF32, {2, 7, 6, 2});
  auto& n = b.Node("GridSample", {"x", "grid"}, {"y"});
  ModelBuilder::StringAttr(n, "mode", mode);
  ModelBuilder::StringAttr(n, "padding_mode", padding);
  b.Output("y", kF32, {2, c, 7, 6});
  return b.Bytes();
}

// DeformConv-19 3x3, 6 -> 4 channels in 2 groups and 3 offset groups (group 0's channels span
// two of them), with mask and bias (the CPU's sampled columns and sgemm).
std::string DeformConv() {
  ModelBuilder b(19);
  b.Input("x", kF32, {2, 6, 9, 8}).Input("offset", kF32, {2, 54, 9, 8});
  b.Input("mask", kF32, {2, 27, 9, 8});
  Weight(b, "w", {4, 3, 3, 3}, 61);
  Weight(b, "b", {4}, 62);
  auto& n = b.Node("DeformConv", {"x", "w", "offset", "b", "mask"}, {"y"});
  ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
  ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
  ModelBuilder::IntAttr(n, "group", 2);
  ModelBuilder::IntAttr(n, "offset_group", 3);
  b.Output("y", kF32, {2, 4, 9, 8});
  return b.Bytes();
}

// Col2Im-18 folding 2x3 blocks, stride 2x1, dilation 1x2, pads 1,0,0,2, into 9x10 images (the
// CPU's row loops).
std::string Col2Im() {
  ModelBuilder b(18);
  b.Input("x", kF32, {2, 3 * 6, 5 * 8});  // 5 x 8 blocks
  b.Int64Init("image_shape", {2}, {9, 10});
  b.Int64Init("block_shape", {2}, {2, 3});
  auto& n = b.Node("Col2Im", {"x", "image_shape", "block_shape"}, {"y"});
  ModelBuilder::IntsAttr(n, "strides", {2, 1});
  ModelBuilder::IntsAttr(n, "dilations", {1, 2});
  ModelBuilder::IntsAttr(n, "pads", {1, 0, 0, 2});
  b.Output("y", kF32, {2, 3, 9, 10});
  return b.Bytes();
}

// AffineGrid-20, 2-D, align_corners 0, two thetas (the CPU's row loops).
std::string AffineGrid() {
  ModelBuilder b(20);
  b.Input("theta", kF32, {2, 2, 3});
  b.Int64Init("size", {4}, {2, 3, 9, 7});
  b.Node("AffineGrid", {"theta", "size"}, {"grid"});
  b.Output("grid", kF32, {2, 9, 7, 2});
  return b.Bytes();
}

// Cast float32 -> int32 -> float32 on 40,000 elements (the CPU's parallel ranges).
std::string CastRoundTrip() {
  ModelBuilder b(13);
  b.Input("x", kF32, {4, 10000});
  auto& a = b.Node("Cast", {"x"}, {"i"});
  ModelBuilder::IntAttr(a, "to", onnx::TensorProto::INT32);
  auto& f = b.Node("Cast", {"i"}, {"y"});
  ModelBuilder::IntAttr(f, "to", onnx::TensorProto::FLOAT);
  b.Output("y", kF32, {4, 10000});
  return b.Bytes();
}

// CastLike-15: float32 -> int64 like an int64 initializer, then Cast back to float32.
std::string CastLikeRoundTrip() {
  ModelBuilder b(15);
  b.Input("x", kF32, {3, 1000});
  b.Int64Init("like", {1}, {0});
  b.Node("CastLike", {"x", "like"}, {"i"});
  auto& f = b.Node("Cast", {"i"}, {"y"});
  ModelBuilder::IntAttr(f, "to", onnx::TensorProto::FLOAT);
  b.Output("y", kF32, {3, 1000});
  return b.Bytes();
}

std::vector<SelfTestCase> SelfTestCases() {
  struct Raw {
    std::string name, model;
    bool positive_inputs = false;
    bool host_only = false;
  };
  std::vector<Raw> c;
  c.push_back({"conv 3x3 pad 1", ConvModel(8, 16, 11, 3, 1, 1, 1, 1, "")});
  c.push_back({"conv 3x3 stride 2 + relu", ConvModel(8, 12, 13, 3, 2, 1, 1, 1, "relu")});
  c.push_back({"conv 1x1 + residual + relu", ConvModel(16, 24, 7, 1, 1, 0, 1, 1, "residual_relu")});
  c.push_back({"conv depthwise 3x3 + relu6", ConvModel(16, 16, 9, 3, 1, 1, 16, 1, "relu6")});
  c.push_back({"conv grouped dilated + silu", ConvModel(8, 8, 12, 3, 1, 2, 2, 2, "silu")});
  c.push_back({"conv 7x7 stride 2 pad 3", ConvModel(3, 8, 23, 7, 2, 3, 1, 1, "")});
  // 3x3 stride 1 with 16+ channels and 25 output tiles: cpu.conv.winograd and
  // cpu.fusedconv.winograd on AVX2 CPUs without AVX-512, oneDNN's convolution elsewhere.
  c.push_back(
      {"conv 3x3 16->24 20x20 (Winograd on AVX2)", ConvModel(16, 24, 20, 3, 1, 1, 1, 1, "")});
  c.push_back({"conv 3x3 + residual + relu 20x20 (Winograd on AVX2)",
               ConvModel(16, 16, 20, 3, 1, 1, 1, 1, "residual_relu")});
  c.push_back({"int8 QDQ conv 3x3 + relu, QDQ gemm input", QdqConv()});
  c.push_back({"int8 QDQ gemm transB + relu, input zero point", QdqGemm()});
  c.push_back({"int8 QDQ conv 3x3, int8 input zero point -20", QdqConv(-20)});
  c.push_back({"int8 QDQ residual (ONNX Runtime's form): maxpool, conv, add", QdqResidual()});
  c.push_back({"int8 QDQ 1x1 expansion + relu6, depthwise 3x3 s2 + relu6 (one QConvDw)",
               QdqExpandDepthwise()});
  c.push_back({"int8 QDQ average pool 3x3 and global (QAveragePool)", QdqAveragePool()});
  c.push_back({"conv transpose 4x4 s2 p1", ConvTranspose(8, 6, 7, 4, 2, 1, 0, 1)});
  c.push_back({"conv transpose 3x3 s2 outpad 1 grouped", ConvTranspose(8, 4, 5, 3, 2, 1, 1, 2)});
  c.push_back({"matmul 2-D", MatMul({6, 10}, {10, 12}, {6, 12}, false)});
  c.push_back({"matmul batched A", MatMul({2, 3, 6, 10}, {10, 12}, {2, 3, 6, 12}, false)});
  c.push_back({"matmul of two inputs (attention scores)",
               MatMulOfInputs({2, 3, 6, 10}, {2, 3, 10, 12}, {2, 3, 6, 12})});
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
  c.push_back({"batch normalization", BatchNorm()});
  c.push_back({"transpose, concat, reshape", Layout()});
  c.push_back({"slice step -2, pad (crop)", SliceAndPad()});
  c.push_back({"slice thirds of the last axis (contiguous runs)", SliceThirds()});
  c.push_back({"gather axis 1, negative indices", Gather()});
  c.push_back({"split 2+5 along channels", Split()});
  c.push_back({"reduce mean H,W keepdims", Reduce("ReduceMean", {2, 3}, true, {2, 3, 1, 1})});
  c.push_back({"reduce sum axes input", Reduce("ReduceSum", {1}, false, {2, 4, 5})});
  c.push_back({"reduce max non-contiguous", Reduce("ReduceMax", {0, 2}, false, {3, 5})});
  c.push_back({"reduce l2 last", Reduce("ReduceL2", {-1}, true, {2, 3, 4, 1})});
  c.push_back({"reduce min first", Reduce("ReduceMin", {0}, true, {1, 3, 4, 5})});
  c.push_back({"reduce sum square all", Reduce("ReduceSumSquare", {0, 1, 2, 3}, false, {})});
  c.push_back({"upsample-9 nearest x2,x3", Upsample()});
  c.push_back({"flatten, (un)squeeze, identity, dropout", Reshapes()});
  c.push_back({"resize nearest x2 asymmetric floor",
               Resize("nearest", "asymmetric", "floor", {1, 1, 2, 2}, {})});
  c.push_back({"resize linear half_pixel sizes down",
               Resize("linear", "half_pixel", "round_prefer_floor", {}, {1, 3, 3, 4})});
  c.push_back({"resize linear align_corners x1.5",
               Resize("linear", "align_corners", "round_prefer_floor", {1, 1, 1.5f, 1.5f}, {})});
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "HardSwish", "Erf",
                         "Exp", "Neg", "Abs", "Elu", "Gelu"})
    c.push_back({std::string("unary ") + op, Unary(op, {3, 7, 11})});
  c.push_back({"gelu erf form, opset 13 (fused: kiln.Gelu)", GeluErfForm({3, 7, 11})});
  c.push_back({"gelu erf form, large (fused: kiln.Gelu)", GeluErfForm({2, 197, 300})});
  for (const char* op : {"Log", "Sqrt", "Reciprocal"}) {
    Raw pc{std::string("unary ") + op, Unary(op, {3, 7, 11})};
    pc.positive_inputs = true;
    c.push_back(pc);
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"})
    c.push_back({std::string("binary ") + op + " per-channel",
                 Binary(op, {2, 3, 4, 5}, {1, 3, 1, 1}, {2, 3, 4, 5})});
  c.push_back({"binary Add rank mismatch", Binary("Add", {2, 3, 4, 5}, {4, 1}, {2, 3, 4, 5})});
  c.push_back({"binary Mul both broadcast", Binary("Mul", {2, 1, 5}, {3, 1}, {2, 3, 5})});
  Raw pow{"binary Pow", Binary("Pow", {3, 4}, {4}, {3, 4})};
  pow.positive_inputs = true;
  c.push_back(pow);
  Raw flow{"control flow: Loop, If, Scan", ControlFlow()};
  flow.host_only = true;
  c.push_back(flow);
  for (const auto& [mode, padding] :
       {std::pair<const char*, const char*>{"bilinear", "zeros"}, {"bicubic", "reflection"}}) {
    Raw gs{std::string("grid sample ") + mode + " " + padding, GridSample(mode, padding)};
    gs.host_only = true;
    c.push_back(gs);
  }
  Raw gs_last{"grid sample bilinear border, 24 channels", GridSample("bilinear", "border", 24)};
  gs_last.host_only = true;
  c.push_back(gs_last);
  Raw deform{"deformable conv 3x3, groups, offset groups, mask", DeformConv()};
  deform.host_only = true;
  c.push_back(deform);
  Raw cubic{"resize cubic x2 half_pixel (separable passes)",
            Resize("cubic", "half_pixel", "round_prefer_floor", {1, 1, 2, 2}, {})};
  cubic.host_only = true;
  c.push_back(cubic);
  Raw cast{"cast float32 -> int32 -> float32", CastRoundTrip()};
  cast.host_only = true;
  c.push_back(cast);
  Raw cast_like{"castlike float32 -> int64, cast back", CastLikeRoundTrip()};
  cast_like.host_only = true;
  c.push_back(cast_like);
  Raw affine{"affine grid 2-D", AffineGrid()};
  affine.host_only = true;
  c.push_back(affine);
  Raw col2im{"col2im 2x3 blocks, strides, dilations, pads", Col2Im()};
  col2im.host_only = true;
  c.push_back(col2im);
  Raw dyn{"dynamic int8 matmul (ONNX Runtime's quantize_dynamic form)", DynamicQuantMatMul()};
  dyn.host_only = true;
  c.push_back(dyn);
  Raw dyn_sparse{"dynamic int8 matmul, few wide weights", DynamicQuantMatMul(true)};
  dyn_sparse.host_only = true;
  c.push_back(dyn_sparse);
  Raw dyn_conv{"dynamic int8 conv (ONNX Runtime's quantize_dynamic form)", DynamicQuantConv()};
  dyn_conv.host_only = true;
  c.push_back(dyn_conv);
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    Raw rnn{std::string(op) + " bidirectional", Recurrent(op)};
    rnn.host_only = true;
    c.push_back(rnn);
  }
  std::vector<SelfTestCase> out;
  for (Raw& r : c) {
    SelfTestCase k;
    k.name = std::move(r.name);
    k.model = std::move(r.model);
    k.positive_inputs = r.positive_inputs;
    k.host_only = r.host_only;
    onnx::ModelProto m;
    if (m.ParseFromString(k.model)) {
      std::set<std::string> ops;
      std::function<void(const onnx::GraphProto&)> collect = [&](const onnx::GraphProto& g) {
        for (const auto& n : g.node()) {
          ops.insert(n.op_type());
          for (const auto& a : n.attribute())
            if (a.has_g()) collect(a.g());  // control-flow bodies
        }
      };
      collect(m.graph());
      k.op_types.assign(ops.begin(), ops.end());
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace kiln
