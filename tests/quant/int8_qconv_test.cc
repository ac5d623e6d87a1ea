// The int8 convolution kernels against the reference kernels of the unfused QDQ graph:
// cpu.qconv.onednn (QConv), cpu.qconvadd.onednn (fuse_qconv_add) and cpu.qconvdw.onednn
// (fuse_qconv_dw), per-channel QuantizeLinear in every layout, qdq_int8_to_uint8, and a
// malformed kiln.QConvDw refused with its rule.
#include <gtest/gtest.h>

#include "int8_test_util.h"

namespace kiln {
namespace {

using namespace int8_test;  // NOLINT(build/namespaces): test helpers

// A QDQ convolution: Q/DQ on X, DQ on int8 weights (even values, so the halved weights oneDNN
// uses on CPUs without VNNI are exact and the int8 kernel must match the reference closely).
struct QConvCase {
  Shape x;
  int64_t m, k, stride, pad, group;
  bool x_signed, per_channel, bias, residual;
  bool requantize = false;  // Relu -> QuantizeLinear -> DequantizeLinear: QConv writes uint8
  bool relu6 = false;       // Clip(0, 6) instead of Relu: not scale-invariant
  // Full-range uint8 source (up to 255) and odd weights up to +-127: exact only when the kernel
  // neither halves the weights nor saturates (depthwise convolutions, whose 32-bit products do
  // not overflow on any ISA). Not for int8 sources: without VNNI oneDNN's own s8 compensation
  // halves the weights, depthwise too.
  bool full_range = false;
  // One X scale per channel (Q/DQ axis 1; depthwise only: fuse_qdq_conv folds them into the
  // weights' scales), and one requantization scale per output channel (with `requantize`).
  bool channel_x = false, channel_y = false;
  int x_zero = 0;  // X's zero point (per tensor; ONNX Runtime's asymmetric activations)
  // The requantization's zero point in int8 (ONNX Runtime's int8 activations: -128 after a
  // ReLU; qdq_int8_to_uint8 makes it uint8 0, which the convolution absorbs).
  bool y_signed = false;
  int y_zero = 0;
  // No activation before the QuantizeLinear (ONNX Runtime's convolution before a residual Add:
  // an asymmetric requantization, negative values kept).
  bool no_relu = false;
  // HardSigmoid before the QuantizeLinear: its own eltwise_linear precedes the division by
  // y_scale (oneDNN 2.6's AVX2 int8 convolution gave a second eltwise_linear the first's
  // alpha and beta).
  bool hard_sigmoid = false;
};

QConvCase WithHardSigmoid(QConvCase c) {
  c.hard_sigmoid = true;
  return c;
}

QConvCase WithXZero(QConvCase c, int zero) {
  c.x_zero = zero;
  return c;
}

QConvCase WithInt8YZero(QConvCase c, int zero) {
  c.y_signed = true;
  c.y_zero = zero;
  return c;
}

// Requantized without an activation, zero point `zero` (uint8, or int8 when `is_signed`).
QConvCase AsymmetricY(QConvCase c, bool is_signed, int zero) {
  c.requantize = true;
  c.y_signed = is_signed;
  c.y_zero = zero;
  c.no_relu = true;
  return c;
}

QConvCase PerChannelY(QConvCase c) {
  c.channel_y = true;
  return c;
}

// QuantizeLinear with one scale (and zero point) per channel after a float convolution, whose
// output the CPU keeps in a oneDNN blocked layout (`after_conv`) or plain (a graph input): the
// fast kernel against the reference, exact but for a value within float rounding of a step's
// midpoint (the reorder multiplies by 1/scale).
void CheckChannelQuantize(bool after_conv, bool zero_points, bool is_signed) {
  SCOPED_TRACE(std::string(after_conv ? "after a conv" : "graph input") +
               (zero_points ? ", zero points" : ", zero points 0") +
               (is_signed ? ", int8" : ", uint8"));
  ModelBuilder mb(13);
  const int64_t c = 12;
  mb.Input("x", kF32, {2, 4, 7, 7}).OutputAnyShape("y", kF32);
  std::string q_in = "x";
  if (after_conv) {
    mb.FloatInit("w", {c, 4, 3, 3}, Uniform(c * 4 * 9, 21));
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
    q_in = "c";
  }
  const int64_t channels = after_conv ? c : 4;
  mb.FloatInit("s", {channels}, ChannelScales(channels, 0.004f));
  auto* z = mb.proto().mutable_graph()->add_initializer();
  z->set_name("z");
  z->set_data_type(is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
  z->add_dims(channels);
  std::string zp;
  for (int64_t i = 0; i < channels; ++i)
    zp.push_back(static_cast<char>(zero_points ? (is_signed ? 3 * i - 10 : 100 + 5 * i) : 0));
  z->set_raw_data(zp);
  ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {q_in, "s", "z"}, {"q"}), "axis", 1);
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"q", "s", "z"}, {"y"}), "axis", 1);
  const std::string bytes = mb.Bytes();
  SessionOptions ref_opts;
  ref_opts.reference_only = true;
  auto ref = Session::LoadFromBytes(bytes, ref_opts);
  auto fast = Session::LoadFromBytes(bytes, SessionOptions{});
  ASSERT_TRUE(ref.ok() && fast.ok());
  const Tensor x = Tensor::FromVector<float>(Uniform(2 * 4 * 49, 22, -1.5f, 1.5f), {2, 4, 7, 7});
  auto plan = (*fast)->DescribePlan({{"x", x}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("cpu.quantizelinear.channels"), std::string::npos) << *plan;
  std::vector<NamedTensor> want, got;
  ASSERT_TRUE((*ref)->Run({{"x", x}}, &want).ok());
  ASSERT_TRUE((*fast)->Run({{"x", x}}, &got).ok());
  const Tensor& w = want[0].tensor;
  ASSERT_EQ(got[0].tensor.shape(), w.shape());
  const int64_t inner = w.numel() / (2 * channels);
  int64_t off_by_one = 0, bad = 0, clipped = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float step = 0.004f * static_cast<float>(1 + (i / inner) % channels % 7);
    const float d = std::fabs(got[0].tensor.data<float>()[i] - w.data<float>()[i]);
    const float lo = -static_cast<float>(zp[(i / inner) % channels]) * step;
    clipped += std::fabs(w.data<float>()[i] - lo) < 1e-6f;
    if (d <= 1e-6f) continue;
    if (std::fabs(d - step) < 1e-5f && !zero_points && after_conv)
      ++off_by_one;
    else if (bad++ < 3)
      ADD_FAILURE() << "[" << i << "]: " << got[0].tensor.data<float>()[i] << " vs "
                    << w.data<float>()[i];
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LE(off_by_one, w.numel() / 200);
  if (is_signed || zero_points) {  // (uint8 with zero point 0 clips every negative value)
    EXPECT_LT(clipped, w.numel() / 2) << "the values should mostly lie inside the range";
  }
}

TEST(QuantizeChannels, MatchesReferenceInEveryLayout) {
  for (bool after_conv : {false, true})
    for (bool zero_points : {false, true})
      for (bool is_signed : {false, true}) CheckChannelQuantize(after_conv, zero_points, is_signed);
}

class QConvKernelTest : public ::testing::TestWithParam<QConvCase> {};

TEST_P(QConvKernelTest, MatchesReference) {
  const QConvCase& c = GetParam();
  ModelBuilder mb(13);
  mb.Input("x", kF32, c.x).OutputAnyShape("y", kF32);
  const int64_t cin = c.x[1];
  Shape ws = {c.m, cin / c.group, c.k, c.k};
  std::mt19937 rng(5);
  Int8Init(mb, "wq", ws, [&](int64_t) {
    return c.full_range ? static_cast<int>(rng() % 255) - 127
                        : 2 * static_cast<int>(rng() % 127) - 126;
  });
  if (c.per_channel) {
    std::vector<float> sw(static_cast<size_t>(c.m));
    for (int64_t i = 0; i < c.m; ++i) sw[i] = 0.001f * static_cast<float>(1 + i % 5);
    mb.FloatInit("sw", {c.m}, sw);
  } else {
    mb.FloatInit("sw", {}, {0.002f});
  }
  if (c.channel_x)
    mb.FloatInit("sx", {cin}, ChannelScales(cin, 0.005f));
  else
    mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", c.x_signed, c.channel_x ? cin : 0, c.x_zero);
  ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"}), "axis", 1);
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"}), "axis", 1);
  auto& dq = mb.Node("DequantizeLinear", {"wq", "sw"}, {"wd"});
  if (c.per_channel) ModelBuilder::IntAttr(dq, "axis", 0);
  std::vector<std::string> ins = {"xd", "wd"};
  if (c.bias) {
    mb.FloatInit("b", {c.m}, Uniform(static_cast<size_t>(c.m), 6, -2.f, 2.f));
    ins.push_back("b");
  }
  auto& conv = mb.Node("Conv", ins, {"c"});
  ModelBuilder::IntAttr(conv, "group", c.group);
  ModelBuilder::IntsAttr(conv, "strides", {c.stride, c.stride});
  ModelBuilder::IntsAttr(conv, "pads", {c.pad, c.pad, c.pad, c.pad});
  std::string last = "c";
  if (c.residual) {
    mb.Node("Add", {"c", "c0"}, {"s"});
    last = "s";
  }
  if (c.requantize) {
    if (c.channel_y)
      mb.FloatInit("sy", {c.m}, ChannelScales(c.m, 0.01f));
    else
      mb.FloatInit("sy", {}, {0.05f});
    if (c.channel_y && c.y_zero != 0) {  // a different zero point per channel
      auto* z = mb.proto().mutable_graph()->add_initializer();
      z->set_name("zy");
      z->set_data_type(c.y_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
      z->add_dims(c.m);
      std::string raw;
      for (int64_t i = 0; i < c.m; ++i) raw.push_back(static_cast<char>(c.y_zero + 3 * (i % 5)));
      z->set_raw_data(raw);
    } else {
      ZeroPoints(mb, "zy", c.y_signed, c.channel_y ? c.m : 0, c.y_zero);
    }
    if (c.no_relu) {
      mb.Node("Identity", {last}, {"r"});
    } else if (c.hard_sigmoid) {
      auto& hs = mb.Node("HardSigmoid", {last}, {"r"});
      ModelBuilder::FloatAttr(hs, "alpha", 0.3f);
      ModelBuilder::FloatAttr(hs, "beta", 0.4f);
    } else if (c.relu6) {
      mb.FloatInit("lo", {}, {0.f});
      mb.FloatInit("hi", {}, {6.f});
      mb.Node("Clip", {last, "lo", "hi"}, {"r"});
    } else {
      mb.Node("Relu", {last}, {"r"});
    }
    ModelBuilder::IntAttr(mb.Node("QuantizeLinear", {"r", "sy", "zy"}, {"rq"}), "axis", 1);
    ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"rq", "sy", "zy"}, {"y"}), "axis", 1);
  } else {
    mb.Node("Relu", {last}, {"y"});
  }
  if (c.residual) {  // the summand: a float conv of the same output shape
    std::vector<float> w0 = Uniform(static_cast<size_t>(c.m * cin * 9), 8);
    mb.FloatInit("w0", {c.m, cin, 3, 3}, w0);
    auto& n0 = mb.Node("Conv", {"x", "w0"}, {"c0"});
    ModelBuilder::IntsAttr(n0, "strides", {c.stride, c.stride});
    ModelBuilder::IntsAttr(n0, "pads", {1, 1, 1, 1});
    // Keep the graph topologically sorted: move the summand's conv first.
    auto* nodes = mb.proto().mutable_graph()->mutable_node();
    for (int i = nodes->size() - 1; i > 0; --i) nodes->SwapElements(i, i - 1);
  }
  const std::string bytes = mb.Bytes();
  // With a zero point, negative values too (the padding is X's zero point, a real 0).
  Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(NumElements(c.x)), 9, c.x_signed || c.x_zero ? -2.f : 0.f,
              c.full_range ? 5.1f : 2.f),
      c.x);
  if (c.channel_x) {  // each channel's values within its own scale's range (up to 2.5 x 0.005 x 7)
    const int64_t inner = NumElements(c.x) / (c.x[0] * cin);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] *= 0.3f * static_cast<float>(1 + (i / inner) % cin % 7);
  }
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const std::string* plan = &r.plan;
  // int8 output: symmetric, or per-channel zero points (qdq_int8_to_uint8 moves only one
  // per-tensor zero point to uint8).
  const bool int8_out = c.y_signed && (c.channel_y || c.y_zero == 0);
  EXPECT_NE(plan->find(!c.requantize ? "cpu.qconv.onednn float32"
                       : int8_out    ? "cpu.qconv.onednn int8"
                                     : "cpu.qconv.onednn uint8"),
            std::string::npos)
      << *plan;
  size_t quantize_steps = 0;
  for (size_t at = plan->find("QuantizeLinear '"); at != std::string::npos;
       at = plan->find("QuantizeLinear '", at + 1))
    ++quantize_steps;
  EXPECT_EQ(quantize_steps, 1u) << "only X's QuantizeLinear may run apart from the convolution:\n"
                                << *plan;
  const int64_t inner = r.want.numel() / (r.want.shape()[0] * c.m);
  ExpectCloseOrOneStep(r, c.requantize, [&](int64_t i) {
    return c.channel_y ? 0.01f * static_cast<float>(1 + (i / inner) % c.m % 7) : 0.05f;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QConvKernelTest,
    ::testing::Values(
        QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false},
        QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, false, true, true, false},
        QConvCase{{1, 8, 7, 7}, 24, 1, 1, 0, 1, true, true, false, false},
        QConvCase{{1, 6, 8, 8}, 12, 3, 1, 1, 2, true, false, true, false},
        QConvCase{{2, 8, 10, 10}, 8, 3, 1, 1, 1, false, true, true, true},
        QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false, true},
        QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, true, true, true, false, true},
        // ReLU6 before the absorbed QuantizeLinear (MobileNetV2): its bound is
        // in float units, so the division by y_scale must come after it.
        QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false, true, true},
        QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false, true, true},
        QConvCase{{2, 24, 10, 10}, 24, 3, 1, 1, 24, false, true, true, false, false, false, true},
        QConvCase{{1, 16, 11, 11}, 16, 5, 2, 2, 16, false, true, false, false, false, false, true},
        // Per-channel X scales on depthwise convolutions (uint8 and int8 sources), and
        // per-channel requantization (ReLU6 before it: not scale-invariant).
        QConvCase{
            {2, 24, 10, 10}, 24, 3, 1, 1, 24, false, true, true, false, false, false, false, true},
        QConvCase{
            {1, 16, 12, 12}, 16, 3, 2, 1, 16, true, true, true, false, false, false, false, true},
        QConvCase{
            {2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false, true, true, false, false, true},
        QConvCase{{1, 16, 10, 10},
                  16,
                  3,
                  1,
                  1,
                  16,
                  true,
                  true,
                  true,
                  false,
                  true,
                  false,
                  false,
                  true,
                  true},
        // HardSigmoid (a linear step and a clip) before the requantization, dense and depthwise.
        WithHardSigmoid(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false, true}),
        WithHardSigmoid(QConvCase{
            {1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false, true}),
        // ONNX Runtime's asymmetric activations: X with a zero point (uint8 100 and 128; int8
        // -20 and 37, fed to oneDNN as uint8), padded, strided, depthwise, residual, requantized.
        WithXZero(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false}, 100),
        WithXZero(QConvCase{{1, 6, 8, 8}, 12, 3, 2, 1, 2, true, false, true, false}, -20),
        WithXZero(QConvCase{{1, 16, 12, 12}, 16, 3, 2, 1, 16, false, true, true, false}, 128),
        WithXZero(QConvCase{{1, 16, 11, 11}, 16, 5, 1, 2, 16, true, true, false, false}, 37),
        WithXZero(QConvCase{{2, 8, 10, 10}, 8, 3, 1, 1, 1, false, true, true, true}, 100),
        WithXZero(QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, true, true, true, false, true}, -20),
        // ONNX Runtime's int8 activations: zero point -128 after the ReLU (and -20 on X).
        WithInt8YZero(
            WithXZero(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, true, true, true, false, true}, -20),
            -128),
        WithInt8YZero(QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, true, true, true, false, true},
                      -128),
        // ... and before a residual Add: no activation, zero point 16 in int8 (moved to uint8
        // 144 by qdq_int8_to_uint8) or 100 in uint8: oneDNN's destination zero point.
        AsymmetricY(WithXZero(QConvCase{{2, 8, 9, 9}, 16, 1, 1, 0, 1, false, true, true, false},
                              100),
                    true, 16),
        AsymmetricY(QConvCase{{2, 8, 9, 9}, 16, 3, 2, 1, 1, false, true, true, false}, false, 100),
        AsymmetricY(QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false}, true,
                    -5),
        // ... with one requantization scale and zero point per output channel.
        PerChannelY(AsymmetricY(QConvCase{{2, 8, 9, 9}, 16, 3, 1, 1, 1, false, true, true, false},
                                false, 100)),
        PerChannelY(AsymmetricY(
            QConvCase{{1, 16, 10, 10}, 16, 3, 1, 1, 16, false, true, true, false}, true, -5))));

// qdq_int8_to_uint8: an int8 QuantizeLinear/DequantizeLinear pair with a zero point becomes uint8
// with the zero point + 128, exactly (every value of the float result the same); symmetric int8
// (zero point 0) and a pair whose reader is not a DequantizeLinear stay int8.
TEST(QdqInt8ToUint8, ShiftsAsymmetricInt8ActivationsExactly) {
  for (int zero : {-128, -100, 5, 0}) {
    SCOPED_TRACE("zero point " + std::to_string(zero));
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 3, 5, 5}).OutputAnyShape("y", kF32);
    mb.FloatInit("s", {}, {0.037f});
    ZeroPoints(mb, "z", true, 0, zero);
    mb.Node("QuantizeLinear", {"x", "s", "z"}, {"xq"});
    mb.Node("DequantizeLinear", {"xq", "s", "z"}, {"xd"});
    mb.Node("Relu", {"xd"}, {"y"});
    // Values up to well beyond the int8 range on both sides, and halfway cases.
    std::vector<float> v = Uniform(150, 3, -7.f, 7.f);
    for (size_t i = 0; i < 20; ++i) v[i] = 0.037f * (static_cast<float>(i) - 10.f + 0.5f);
    RefAndFast r;
    RunRefAndFast(mb.Bytes(), Tensor::FromVector<float>(v, {2, 3, 5, 5}), &r);
    if (HasFatalFailure()) return;
    const bool moved = r.plan.find("uint8[2,3,5,5]") != std::string::npos;
    EXPECT_EQ(moved, zero != 0) << r.plan;
    for (int64_t i = 0; i < r.want.numel(); ++i)
      ASSERT_EQ(r.got.data<float>()[i], r.want.data<float>()[i]) << "[" << i << "] " << v[i];
  }
}

// fuse_qconv_add: a residual block's last convolution in int8 (QDQ on its input, weights and
// output) whose output only feeds the residual QAdd becomes one QConvAdd; the fast kernel (a
// oneDNN post-op chain: A rounded and clipped on its grid, then the sum post-op reading R, the
// Relu, 1 / y_scale) against the unfused graph's reference. Even weights, so the halved weights
// of CPUs without VNNI are exact: what differs is only where the float reference and oneDNN's
// integer accumulation round a tie apart, one step of A or Y.
struct QConvAddCase {
  bool r_signed;
  int r_zero;
  bool y_signed;
  int y_zero;
  bool relu;
  std::string conv_act = "";  // the convolution's own activation before A's QuantizeLinear
  int64_t ch = 16;  // channels (8: oneDNN's AVX-512 int8 convolutions pick another kernel)
};

class QConvAddKernelTest : public ::testing::TestWithParam<QConvAddCase> {};

TEST_P(QConvAddKernelTest, FusesAndMatchesTheUnfusedGraph) {
  const QConvAddCase& c = GetParam();
  const int64_t ch = c.ch;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 6, 6}).OutputAnyShape("y", kF32);
  mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", false, 0, 128);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  Int8Init(mb, "wq", {ch, ch, 3, 3},
           [](int64_t i) { return 2 * static_cast<int>((i * 37) % 127) - 126; });
  mb.FloatInit("sw", {ch}, ChannelScales(ch, 0.0003f));
  mb.FloatInit("b", {ch}, Uniform(ch, 6, -1.f, 1.f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"wq", "sw"}, {"w"}), "axis", 0);
  ModelBuilder::IntsAttr(mb.Node("Conv", {"xd", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  std::string a = "c";
  if (c.conv_act == "Relu") {
    mb.Node("Relu", {"c"}, {"a"});
    a = "a";
  } else if (c.conv_act == "Silu") {
    mb.Node("Sigmoid", {"c"}, {"g"});
    mb.Node("Mul", {"c", "g"}, {"a"});
    a = "a";
  } else if (c.conv_act == "Clip") {
    mb.FloatInit("lo", {}, {0.f});
    mb.FloatInit("hi", {}, {1.f});
    mb.Node("Clip", {"c", "lo", "hi"}, {"a"});
    a = "a";
  }
  mb.FloatInit("sa", {}, {0.05f});
  ZeroPoints(mb, "za", true, 0, 3);
  mb.Node("QuantizeLinear", {a, "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  mb.FloatInit("sr", {}, {0.017f});
  ZeroPoints(mb, "zr", c.r_signed, 0, c.r_zero);
  mb.Node("QuantizeLinear", {"x", "sr", "zr"}, {"rq"});
  mb.Node("DequantizeLinear", {"rq", "sr", "zr"}, {"rd"});
  mb.Node("Add", {"ad", "rd"}, {"s"});
  if (c.relu) mb.Node("Relu", {"s"}, {"r"});
  mb.FloatInit("sy", {}, {0.043f});
  ZeroPoints(mb, "zy", c.y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {c.relu ? "r" : "s", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  RefAndFast r;
  RunRefAndFast(mb.Bytes(),
                Tensor::FromVector<float>(Uniform(2 * ch * 36, 42, -2.f, 2.f), {2, ch, 6, 6}), &r);
  if (HasFatalFailure()) return;
  // Clip's bound means something else in A's units: that convolution stays a QConv.
  const bool fused = c.conv_act != "Clip";
  EXPECT_EQ(r.plan.find("cpu.qconvadd.onednn") != std::string::npos, fused) << r.plan;
  EXPECT_EQ(r.plan.find("QAdd '") == std::string::npos, fused) << r.plan;
  int64_t off = 0, nonzero = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) {
    const float d = std::fabs(r.got.data<float>()[i] - r.want.data<float>()[i]);
    ASSERT_LE(d, 0.043f * 1.01f) << "[" << i << "] " << r.got.data<float>()[i] << " vs "
                                 << r.want.data<float>()[i];
    off += d > 0;
    nonzero += r.want.data<float>()[i] != 0.f;
  }
  EXPECT_LT(off, r.want.numel() / 100) << "values a step off";
  EXPECT_GT(nonzero, r.want.numel() / 4) << "the outputs should not be mostly zero";
}

INSTANTIATE_TEST_SUITE_P(Operands, QConvAddKernelTest,
                         ::testing::Values(QConvAddCase{false, 0, false, 0, true},
                                           QConvAddCase{true, 0, false, 0, true},
                                           QConvAddCase{true, -5, true, 7, false},
                                           QConvAddCase{false, 120, true, 0, false},
                                           QConvAddCase{false, 0, false, 0, true, "Relu"},
                                           QConvAddCase{true, -5, true, 7, false, "Relu"},
                                           QConvAddCase{false, 0, false, 0, true, "Clip"},
                                           QConvAddCase{false, 125, false, 0, false, "", 8},
                                           QConvAddCase{true, -3, true, -128, false, "", 8},
                                           QConvAddCase{false, 0, false, 0, true, "Relu", 8},
                                           // SiLU (YOLOv8's bottlenecks): swish with alpha a_scale
                                           QConvAddCase{false, 0, false, 0, true, "Silu"},
                                           QConvAddCase{true, -5, true, 7, false, "Silu"},
                                           QConvAddCase{false, 125, false, 0, false, "Silu", 8}));

// fuse_qconv_dw: a 1x1 convolution in int8 whose quantized output A only feeds a 3x3 depthwise one
// (a MobileNetV2 block's expansion and depthwise convolution) becomes one QConvDw, whose kernel
// runs the depthwise convolution as a oneDNN post-op of the 1x1 one. Its result must be the two
// QConv kernels' bit for bit (the same roundings of A and Y), its reference kernel the unfused
// QDQ graph's reference bit for bit, and the fast result the reference's but for values one step
// of Y apart (ties rounded apart). Even 1x1 weights, so the halved weights of CPUs without VNNI
// are exact. A zero point on A or Y is not what oneDNN's depthwise post-op takes: no fusion. The
// source is uint8 or int8.
struct QConvDwCase {
  int64_t stride;
  std::string expand_act;  // "Clip" (ReLU6), "Relu"
  std::string dw_act;      // "Clip", "" (ShuffleNet: Y signed)
  int64_t m = 24;          // expanded channels (not a multiple of oneDNN's 16-channel blocks)
  int a_zero = 0, y_zero = 0;
  bool x_signed = false;
};

class QConvDwKernelTest : public ::testing::TestWithParam<QConvDwCase> {};

TEST_P(QConvDwKernelTest, FusesAndMatchesTheTwoQConvs) {
  const QConvDwCase& c = GetParam();
  const int64_t ch = 8, m = c.m;
  ModelBuilder mb(13);
  mb.Input("x", kF32, {2, ch, 11, 11}).OutputAnyShape("y", kF32);
  mb.FloatInit("sx", {}, {0.02f});
  ZeroPoints(mb, "zx", c.x_signed, 0, 0);
  mb.Node("QuantizeLinear", {"x", "sx", "zx"}, {"xq"});
  mb.Node("DequantizeLinear", {"xq", "sx", "zx"}, {"xd"});
  Int8Init(mb, "w1", {m, ch, 1, 1},
           [](int64_t i) { return 2 * static_cast<int>((i * 37) % 127) - 126; });
  mb.FloatInit("sw1", {m}, ChannelScales(m, 0.0004f));
  mb.FloatInit("b1", {m}, Uniform(static_cast<size_t>(m), 7, -0.5f, 0.5f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"w1", "sw1"}, {"w1d"}), "axis", 0);
  mb.Node("Conv", {"xd", "w1d", "b1"}, {"c1"});
  mb.FloatInit("lo", {}, {0.f});
  mb.FloatInit("hi", {}, {6.f});
  if (c.expand_act == "Clip")
    mb.Node("Clip", {"c1", "lo", "hi"}, {"a1"});
  else
    mb.Node("Relu", {"c1"}, {"a1"});
  mb.FloatInit("sa", {}, {0.011f});
  ZeroPoints(mb, "za", false, 0, c.a_zero);
  mb.Node("QuantizeLinear", {"a1", "sa", "za"}, {"aq"});
  mb.Node("DequantizeLinear", {"aq", "sa", "za"}, {"ad"});
  Int8Init(mb, "w2", {m, 1, 3, 3},
           [](int64_t i) { return static_cast<int>((i * 53) % 255) - 127; });
  mb.FloatInit("sw2", {m}, ChannelScales(m, 0.002f));
  mb.FloatInit("b2", {m}, Uniform(static_cast<size_t>(m), 8, -0.3f, 0.3f));
  ModelBuilder::IntAttr(mb.Node("DequantizeLinear", {"w2", "sw2"}, {"w2d"}), "axis", 0);
  auto& dw = mb.Node("Conv", {"ad", "w2d", "b2"}, {"c2"});
  ModelBuilder::IntsAttr(dw, "pads", {1, 1, 1, 1});
  ModelBuilder::IntsAttr(dw, "strides", {c.stride, c.stride});
  ModelBuilder::IntAttr(dw, "group", m);
  const bool y_signed = c.dw_act.empty();
  if (c.dw_act == "Clip") mb.Node("Clip", {"c2", "lo", "hi"}, {"a2"});
  mb.FloatInit("sy", {}, {0.023f});
  ZeroPoints(mb, "zy", y_signed, 0, c.y_zero);
  mb.Node("QuantizeLinear", {c.dw_act.empty() ? "c2" : "a2", "sy", "zy"}, {"yq"});
  mb.Node("DequantizeLinear", {"yq", "sy", "zy"}, {"y"});
  const std::string bytes = mb.Bytes();
  const Tensor x = Tensor::FromVector<float>(
      Uniform(static_cast<size_t>(2 * ch * 121), 43, -2.f, 2.f), {2, ch, 11, 11});
  RefAndFast r;
  RunRefAndFast(bytes, x, &r);
  if (HasFatalFailure()) return;
  const bool fusable = c.a_zero == 0 && c.y_zero == 0;
  EXPECT_EQ(r.plan.find("cpu.qconvdw.onednn") != std::string::npos, fusable) << r.plan;
  ExpectCloseOrOneStep(r, true, [](int64_t) { return 0.023f; });
  int64_t nonzero = 0;
  for (int64_t i = 0; i < r.want.numel(); ++i) nonzero += r.want.data<float>()[i] != 0.f;
  EXPECT_GT(nonzero, r.want.numel() / 4) << "the outputs should not be mostly zero";
  if (!fusable) return;
  // The two QConv kernels (the pass off) and the fused reference kernel (optimized graph,
  // reference kernels only) against the fused kernel and the unfused reference.
  auto run = [&](SessionOptions o, Tensor* y, std::string* plan) {
    auto s = Session::LoadFromBytes(bytes, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto p = (*s)->DescribePlan({{"x", x}});
    ASSERT_TRUE(p.ok());
    *plan = *p;
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
    *y = out[0].tensor;
  };
  SessionOptions apart;
  apart.disabled_passes = {"fuse_qconv_dw"};
  SessionOptions fused_ref;
  fused_ref.reference_only = true;
  Tensor y_apart, y_fused_ref;
  std::string plan_apart, plan_fused_ref;
  run(apart, &y_apart, &plan_apart);
  run(fused_ref, &y_fused_ref, &plan_fused_ref);
  if (HasFatalFailure()) return;
  EXPECT_EQ(plan_apart.find("QConvDw"), std::string::npos) << plan_apart;
  EXPECT_NE(plan_fused_ref.find("QConvDw"), std::string::npos) << plan_fused_ref;
  ASSERT_EQ(y_apart.shape(), r.got.shape());
  ASSERT_EQ(y_fused_ref.shape(), r.want.shape());
  const size_t bytes_out = static_cast<size_t>(r.got.numel()) * sizeof(float);
  EXPECT_EQ(std::memcmp(y_apart.raw(), r.got.raw(), bytes_out), 0)
      << "the fused kernel differs from the two QConv kernels";
  EXPECT_EQ(std::memcmp(y_fused_ref.raw(), r.want.raw(), bytes_out), 0)
      << "QConvDw's reference kernel differs from the unfused graph's reference";
}

INSTANTIATE_TEST_SUITE_P(Blocks, QConvDwKernelTest,
                         ::testing::Values(QConvDwCase{1, "Clip", "Clip"},
                                           QConvDwCase{2, "Clip", "Clip"},
                                           QConvDwCase{1, "Relu", ""},
                                           QConvDwCase{2, "Relu", "", 32},
                                           QConvDwCase{1, "Clip", "Clip", 24, 3, 0},
                                           QConvDwCase{2, "Clip", "", 24, 0, 5},
                                           QConvDwCase{1, "Clip", "Clip", 24, 0, 0, true}));

// A hand-written kiln.QConvDw that breaks its rules (too few inputs, a stride of 0, an unknown
// depthwise activation, depthwise weights with two channels per group, A's scale per channel)
// is refused at load or when its plan is made, with a message naming the node and the rule.
TEST(QConvDwOp, MalformedNodeIsRefusedWithItsRule) {
  struct Bad {
    const char* what;
    std::string expect;
  };
  for (const Bad& b :
       {Bad{"inputs", "QConvDw takes 14 inputs; got 13"}, Bad{"stride", "dw_strides must be >= 1"},
        Bad{"activation", "dw_activation must be empty or one of"},
        Bad{"weights", "Wd must be int8 [M, 1, k...] with M = 8"},
        Bad{"a_scale", "a_scale and a_zero_point must be one element each"}}) {
    SCOPED_TRACE(b.what);
    const std::string what = b.what;
    ModelBuilder mb(13);
    auto* kiln = mb.proto().add_opset_import();
    kiln->set_domain("kiln");
    kiln->set_version(1);
    mb.Input("x", onnx::TensorProto::UINT8, {1, 4, 6, 6}).OutputAnyShape("y", kF32);
    mb.FloatInit("sx", {}, {0.1f});
    Int8Init(mb, "w1", {8, 4, 1, 1}, [](int64_t i) { return static_cast<int>(i % 5); });
    mb.FloatInit("sw1", {8}, ChannelScales(8, 0.01f));
    const int64_t m_a = what == "a_scale" ? 8 : 0;
    mb.FloatInit("sa", m_a ? Shape{m_a} : Shape{}, std::vector<float>(m_a ? 8 : 1, 0.05f));
    ZeroPoints(mb, "za", false, m_a);
    Int8Init(mb, "wd", {8, what == "weights" ? 2 : 1, 3, 3},
             [](int64_t i) { return static_cast<int>(i % 9) - 4; });
    mb.FloatInit("swd", {8}, ChannelScales(8, 0.02f));
    mb.FloatInit("sy", {}, {0.1f});
    ZeroPoints(mb, "zy", false, 0);
    std::vector<std::string> in = {"x",  "sx", "",   "w1",  "sw1", "",   "",
                                   "sa", "za", "wd", "swd", "",    "sy", "zy"};
    if (what == "inputs") in.pop_back();
    auto& n = mb.Node("QConvDw", in, {"q"}, "dw");
    n.set_domain("kiln");
    ModelBuilder::IntsAttr(n, "dw_strides", {what == "stride" ? 0 : 1, 1});
    ModelBuilder::IntsAttr(n, "dw_pads", {1, 1, 1, 1});
    if (what == "activation") ModelBuilder::StringAttr(n, "dw_activation", "Bogus");
    mb.Node("DequantizeLinear", {"q", "sy", "zy"}, {"y"});
    auto s = Session::LoadFromBytes(mb.Bytes(), SessionOptions{});
    std::string msg = s.status().ToString();
    if (s.ok()) {  // shapes are checked when a plan is made
      std::vector<NamedTensor> out;
      Status r = (*s)->Run({{"x", Tensor::Empty(DataType::kUInt8, {1, 4, 6, 6})}}, &out);
      ASSERT_FALSE(r.ok());
      msg = r.ToString();
    }
    EXPECT_NE(msg.find("dw"), std::string::npos) << msg;
    EXPECT_NE(msg.find(b.expect), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace kiln
