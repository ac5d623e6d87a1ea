// oneDNN CPU kernels reading and writing blocked or channels-last layouts, against the reference
// kernels: small graphs whose convolutions hand their oneDNN layout (nChw8c / nChw16c / acdb) to
// pooling, binary ops, Transpose, Concat, Split, BatchNormalization, the squeeze-excite loops and
// the sampling kernels, operands in mixed layouts, and outputs kept plain where few channels would
// be padded. Each case asserts the expected kernels were selected (blocked_layout_expectations.h
// names the few a CPU below AVX-512 may decline), so a case cannot pass by falling back.
#include <gtest/gtest.h>

#include <cmath>

#include "onednn_test_util.h"

namespace kiln {
namespace {

using namespace onednn_test;  // NOLINT(build/namespaces): test helpers

TEST(OneDnnKernelTest, PoolsOnBlockedInput) {
  for (int variant = 0; variant < 5; ++variant) {
    ModelBuilder mb;
    mb.Input("x", kF32, {2, 16, 11, 13}).Output("y", kF32, {});
    mb.FloatInit("w", {16, 16, 1, 1}, Random(256, 4));
    mb.Node("Conv", {"x", "w"}, {"c"});
    std::string kernel;
    if (variant == 0 || variant == 1) {
      auto& p = mb.Node("MaxPool", {"c"}, {"y"});
      ModelBuilder::IntsAttr(p, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(p, "strides", {2, 2});
      ModelBuilder::IntsAttr(p, "pads", {1, 0, 1, 0});
      ModelBuilder::IntAttr(p, "ceil_mode", variant);
      kernel = "cpu.maxpool.onednn";
    } else if (variant == 2 || variant == 3) {
      auto& p = mb.Node("AveragePool", {"c"}, {"y"});
      ModelBuilder::IntsAttr(p, "kernel_shape", {3, 2});
      ModelBuilder::IntsAttr(p, "pads", {1, 1, 1, 1});
      ModelBuilder::IntAttr(p, "count_include_pad", variant - 2);
      kernel = "cpu.averagepool.onednn";
    } else {
      mb.Node("GlobalAveragePool", {"c"}, {"y"});
      kernel = "cpu.globalaveragepool.channels";  // the conv's channels-last output
    }
    SCOPED_TRACE(variant);
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 16, 11, 13}, 5)}},
                          {"cpu.conv.onednn", kernel});
  }
}

// Squeeze-excite shape: Mul(scale[N,C,1,1], x[N,C,H,W]) with the broadcast operand first, and a
// residual Add of two blocked conv outputs.
TEST(OneDnnKernelTest, BinaryBroadcastAndBlockedOperands) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 32, 9, 9}).Output("y", kF32, {});
  mb.FloatInit("w1", {32, 32, 3, 3}, Random(32 * 32 * 9, 6));
  mb.FloatInit("w2", {32, 32, 1, 1}, Random(32 * 32, 7));
  auto& c1 = mb.Node("Conv", {"x", "w1"}, {"a"});
  ModelBuilder::IntsAttr(c1, "pads", {1, 1, 1, 1});
  mb.Node("Conv", {"x", "w2"}, {"b"});
  mb.Node("Add", {"a", "b"}, {"s"});
  mb.Node("GlobalAveragePool", {"s"}, {"g"});
  mb.Node("Sigmoid", {"g"}, {"sg"});
  mb.Node("Mul", {"sg", "s"}, {"m"});
  mb.Node("Sub", {"m", "x"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 32, 9, 9}, 8)}},
                        {"cpu.add.onednn", "cpu.mul.channel_scale", "cpu.sub.onednn"});
}

// Full-size operands in different layouts (a plain tensor and a blocked convolution output, as in
// ConvNeXt's residual Add): the second is reordered into the first's layout before the primitive.
TEST(OneDnnKernelTest, MixedLayoutFullSizeOperands) {
  ModelBuilder mb;
  mb.Input("x", kF32, {1, 24, 7, 9}).Output("y", kF32, {});
  mb.FloatInit("w", {24, 24, 3, 3}, Random(24 * 24 * 9, 12));
  ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
  mb.Node("Sub", {"x", "c"}, {"d"});  // plain first, blocked second; not commutative
  mb.Node("Add", {"d", "c"}, {"y"});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({1, 24, 7, 9}, 13)}},
                        {"cpu.sub.onednn", "cpu.add.onednn"});
}

// ConvNeXt's NCHW -> NHWC Transpose reading a blocked conv output, and a plain Transpose.
TEST(OneDnnKernelTest, TransposeBlockedAndPlain) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2, 16, 5, 7}).Output("y", kF32, {}).Output("z", kF32, {});
  mb.FloatInit("w", {16, 16, 1, 1}, Random(256, 14));
  mb.Node("Conv", {"x", "w"}, {"c"});
  ModelBuilder::IntsAttr(mb.Node("Transpose", {"c"}, {"y"}), "perm", {0, 2, 3, 1});
  ModelBuilder::IntsAttr(mb.Node("Transpose", {"x"}, {"z"}), "perm", {3, 1, 0, 2});
  CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 16, 5, 7}, 15)}},
                        {"cpu.transpose.onednn"});
}

// Squeeze-excite's per-channel scale and global average pooling as plain loops
// (backends/cpu/channel_ops.cc): channels-last operands straight from a convolution and plain
// ones from the graph inputs, the scale first or second, per sample or shared across the batch,
// x overwritten in place or still needed afterwards, few pixels (one partial sum) and many
// (one per thread), odd channel counts, ranks 3 to 5.
TEST(OneDnnKernelTest, ChannelScaleAndGlobalAverage) {
  struct Case {
    Shape x;
    bool after_conv, scale_first, shared_scale, reuse_x;
  };
  const Case cases[] = {
      {{2, 19, 12, 12}, true, false, false, false}, {{2, 19, 12, 12}, true, true, true, true},
      {{1, 40, 3, 5}, true, false, false, true},    {{3, 7, 9, 11}, false, false, false, false},
      {{2, 5, 17}, false, true, true, false},       {{1, 6, 3, 4, 5}, false, false, false, true},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    const int64_t ch = c.x[1];
    Shape s_shape(c.x.size(), 1);
    s_shape[0] = c.shared_scale ? 1 : c.x[0];
    s_shape[1] = ch;
    ModelBuilder mb;
    mb.Input("x", kF32, c.x).Output("y", kF32, {});
    std::string x = "x";
    if (c.after_conv) {
      mb.FloatInit("w", {ch, ch, 1, 1}, Random(static_cast<size_t>(ch * ch), seed++));
      mb.Node("Conv", {"x", "w"}, {"cx"});
      x = "cx";
    }
    // s = Sigmoid(GlobalAveragePool(x)) per sample, or a shared constant scale.
    std::string scale = "s";
    if (c.shared_scale) {
      mb.FloatInit("s", s_shape, Random(static_cast<size_t>(ch), seed++));
      mb.Node("GlobalAveragePool", {x}, {"g"});
    } else {
      mb.Node("GlobalAveragePool", {x}, {"g"});
      mb.Node("Sigmoid", {"g"}, {"s"});
    }
    mb.Node("Mul",
            c.scale_first ? std::vector<std::string>{scale, x} : std::vector<std::string>{x, scale},
            {"m"});
    // Keep g in the outputs' dependencies; with reuse_x, x is read again after the Mul.
    mb.Node("Add", {"m", c.reuse_x ? x : "m"}, {"a"});
    mb.Node("Mul", {"a", "g"}, {"y"});
    SCOPED_TRACE(ShapeToString(c.x));
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(c.x, seed++)}},
                          {"cpu.mul.channel_scale", "cpu.globalaveragepool.channels"});
  }
}

// Concat on oneDNN: channels-last/blocked convolution outputs along channels (as in YOLO necks),
// three plain inputs along a middle axis, a negative axis, and a rank-1 concat.
TEST(OneDnnKernelTest, ConcatLayoutsAndAxes) {
  {
    ModelBuilder mb;
    mb.Input("x", kF32, {2, 8, 7, 9}).Output("y", kF32, {});
    mb.FloatInit("w1", {16, 8, 1, 1}, Random(128, 60));
    mb.FloatInit("w2", {5, 8, 3, 3}, Random(360, 61));
    mb.Node("Conv", {"x", "w1"}, {"a"});
    ModelBuilder::IntsAttr(mb.Node("Conv", {"x", "w2"}, {"b"}), "pads", {1, 1, 1, 1});
    ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "x"}, {"c"}), "axis", 1);
    mb.Node("Relu", {"c"}, {"y"});
    CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor({2, 8, 7, 9}, 62)}},
                          {"cpu.concat.onednn"});
  }
  // Plain inputs: oneDNN above 64 KiB, block copies below (its fixed cost dominates there).
  for (const Shape& shape : {Shape{12, 40, 50}, Shape{3, 4, 5}}) {
    const bool big = shape[0] == 12;
    for (int64_t axis : {2, -1, 0}) {
      ModelBuilder mb;
      mb.Input("a", kF32, shape).Input("b", kF32, shape).Output("y", kF32, {});
      ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "a"}, {"y"}), "axis", axis);
      SCOPED_TRACE(axis);
      CheckAgainstReference(mb.Bytes(),
                            {{"a", RandomTensor(shape, 63)}, {"b", RandomTensor(shape, 64)}},
                            {big ? "cpu.concat.onednn" : "cpu.concat.copy"});
    }
  }
  ModelBuilder mb;
  mb.Input("a", kF32, {7}).Input("b", kF32, {2}).Output("y", kF32, {}).Output("z", kF32, {});
  ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b"}, {"y"}), "axis", 0);
  ModelBuilder::IntAttr(mb.Node("Concat", {"a", "b", "a", "b", "a"}, {"z"}), "axis", 0);
  CheckAgainstReference(mb.Bytes(), {{"a", RandomTensor({7}, 65)}, {"b", RandomTensor({2}, 66)}},
                        {"cpu.concat.copy"});
  // More than 4 inputs, some from convolutions: converted to plain and block-copied (measured
  // faster, see the kernel), also along an inner axis.
  ModelBuilder many;
  many.Input("x", kF32, {1, 8, 5, 5}).Output("y", kF32, {});
  many.FloatInit("w", {8, 8, 1, 1}, Random(64, 67));
  many.Node("Conv", {"x", "w"}, {"c"});
  many.Output("z", kF32, {});
  ModelBuilder::IntAttr(many.Node("Concat", {"c", "x", "c", "x", "c"}, {"y"}), "axis", 1);
  ModelBuilder::IntAttr(many.Node("Concat", {"x", "x", "c", "x", "x"}, {"z"}), "axis", 2);
  CheckAgainstReference(many.Bytes(), {{"x", RandomTensor({1, 8, 5, 5}, 68)}},
                        {"cpu.concat.copy", "to_plain"});
}

// The sampling kernels after a convolution, whose output is blocked on AVX2 and AVX-512: bilinear
// GridSample (also with 8 channels, below the channels-last threshold) and DeformConv read that
// layout and reorder it themselves (no conversion step in the plan); nearest GridSample and the
// separable Resize get it converted to plain by the planner. Each is still its fast kernel (a
// kernel declining a layout would hand the node to the reference kernel) and matches the
// reference.
TEST(OneDnnKernelTest, SamplingOpsAfterAConvolution) {
  struct Case {
    std::string op, mode;
    int64_t channels;
    std::string kernel;
    bool reads_layout;
  };
  const Case cases[] = {
      {"GridSample", "bilinear", 24, "cpu.gridsample.loops[bilinear, channels-last]", true},
      {"GridSample", "bilinear", 8, "cpu.gridsample.loops[bilinear, channels-last]", true},
      {"GridSample", "nearest", 24, "cpu.gridsample.loops[nearest]", false},
      {"DeformConv", "", 24, "cpu.deformconv.onednn", true},
      {"Resize", "cubic", 24, "cpu.resize.separable", false},
  };
  uint32_t seed = 950;
  for (const Case& c : cases) {
    ModelBuilder mb(19);
    const Shape xs{1, 8, 12, 10}, ws{c.channels, 8, 3, 3};
    mb.Input("x", kF32, xs).Output("y", kF32, {});
    mb.FloatInit("cw", ws, Random(static_cast<size_t>(NumElements(ws)), seed++));
    auto& conv = mb.Node("Conv", {"x", "cw"}, {"f"});
    ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
    std::vector<NamedTensor> feeds{{"x", RandomTensor(xs, seed++)}};
    if (c.op == "DeformConv") {
      const Shape offs{1, 18, 12, 10}, dws{6, c.channels, 3, 3};
      mb.Input("offset", kF32, offs);
      mb.FloatInit("dw", dws, Random(static_cast<size_t>(NumElements(dws)), seed++));
      auto& n = mb.Node("DeformConv", {"f", "dw", "offset"}, {"y"});
      ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
      ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
      Tensor off = RandomTensor(offs, seed++);
      for (int64_t i = 0; i < off.numel(); ++i) off.data<float>()[i] *= 2.f;
      feeds.push_back({"offset", off});
    } else if (c.op == "GridSample") {
      const Shape gs{1, 9, 7, 2};
      mb.Input("grid", kF32, gs);
      auto& n = mb.Node("GridSample", {"f", "grid"}, {"y"});
      ModelBuilder::StringAttr(n, "mode", c.mode);
      feeds.push_back({"grid", RandomTensor(gs, seed++)});
    } else {
      mb.FloatInit("roi", {0}, {});
      mb.FloatInit("scales", {4}, {1, 1, 1.5f, 2});
      auto& n = mb.Node("Resize", {"f", "roi", "scales"}, {"y"});
      ModelBuilder::StringAttr(n, "mode", c.mode);
    }
    SCOPED_TRACE(c.kernel + " " + std::to_string(c.channels) + " channels");
    CheckAgainstReference(mb.Bytes(), feeds, {"cpu.conv.onednn", c.kernel});
    auto s = Session::LoadFromBytes(mb.Bytes());
    ASSERT_TRUE(s.ok());
    auto plan = (*s)->DescribePlan(feeds);
    ASSERT_TRUE(plan.ok());
    // Where the convolution writes plain (no CPU today), there is nothing to read or convert.
    if (c.reads_layout && plan->find("@") != std::string::npos) {
      EXPECT_NE(plan->find(" 0 layout conversions"), std::string::npos) << *plan;
    }
  }
}

// Convolutions and deconvolutions with fewer than 8 output channels write plain outputs (a
// blocked one would pad each pixel to 8 or 16 channels for them and the elementwise steps
// after), and match the reference: a 16 -> 1 ConvTranspose then bias Add and Sigmoid (PP-OCR's
// probability map), a 16 -> 3 Conv; a 16 -> 8 Conv keeps oneDNN's choice.
TEST(OneDnnKernelTest, FewOutputChannelsArePlain) {
  uint32_t seed = 1200;
  for (const int64_t oc : {1, 3, 8}) {
    for (const bool transpose : {true, false}) {
      ModelBuilder mb(13);
      const Shape xs{1, 16, 12, 10};
      const Shape ws = transpose ? Shape{16, oc, 2, 2} : Shape{oc, 16, 3, 3};
      mb.Input("x", kF32, xs).Output("y", kF32, {});
      mb.FloatInit("w", ws, Random(static_cast<size_t>(NumElements(ws)), seed++));
      mb.FloatInit("b", {1}, {0.25f});
      auto& n = mb.Node(transpose ? "ConvTranspose" : "Conv", {"x", "w"}, {"c"});
      ModelBuilder::IntsAttr(
          n, transpose ? "strides" : "pads",
          transpose ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 1, 1, 1});
      mb.Node("Add", {"c", "b"}, {"a"});
      mb.Node("Sigmoid", {"a"}, {"y"});
      const std::string kernel = transpose ? "cpu.convtranspose.onednn" : "cpu.conv.onednn";
      SCOPED_TRACE(kernel + " to " + std::to_string(oc) + " channels");
      const Tensor x = RandomTensor(xs, seed++);
      CheckAgainstReference(mb.Bytes(), {{"x", x}}, {kernel});
      auto s = Session::LoadFromBytes(mb.Bytes());
      ASSERT_TRUE(s.ok());
      auto plan = (*s)->DescribePlan({{"x", x}});
      ASSERT_TRUE(plan.ok());
      if (oc < 8) {
        EXPECT_EQ(plan->find("@"), std::string::npos) << *plan;
      }
    }
  }
}

// Inference BatchNormalization as a per-channel affine loop: plain inputs of rank 2 to 5 and a
// channels-last convolution output (the optimizer is off here, so nothing is folded), against
// the reference's double arithmetic.
TEST(OneDnnKernelTest, BatchNormalizationAffine) {
  const Shape shapes[] = {{3, 7}, {2, 5, 9}, {2, 6, 5, 7}, {1, 4, 3, 2, 5}};
  uint32_t seed = 120;
  for (int conv = 0; conv < 2; ++conv) {
    for (const Shape& xs : shapes) {
      if (conv && xs.size() != 4) continue;
      const int64_t c = xs[1];
      ModelBuilder mb;
      mb.Input("x", kF32, xs).Output("y", kF32, {});
      std::string x = "x";
      if (conv) {
        mb.FloatInit("w", {c, c, 1, 1}, Random(static_cast<size_t>(c * c), seed++));
        mb.Node("Conv", {"x", "w"}, {"cx"});
        x = "cx";
      }
      std::vector<float> var = Random(static_cast<size_t>(c), seed++);
      for (float& v : var) v = 0.5f + std::fabs(v);
      mb.FloatInit("scale", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("bias", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("mean", {c}, Random(static_cast<size_t>(c), seed++));
      mb.FloatInit("var", {c}, var);
      auto& bn = mb.Node("BatchNormalization", {x, "scale", "bias", "mean", "var"}, {"b"});
      ModelBuilder::FloatAttr(bn, "epsilon", 1e-3f);
      mb.Node("Relu", {"b"}, {"y"});
      SCOPED_TRACE(ShapeToString(xs) + (conv ? " after a conv" : ""));
      const Tensor x_in = RandomTensor(xs, seed++);
      CheckAgainstReference(mb.Bytes(), {{"x", x_in}}, {"cpu.batchnormalization.channels"});
      // With the optimizer: folded into the convolution, or fused with the Relu (one loop).
      if (!conv)
        CheckAgainstReference(mb.Bytes(), {{"x", x_in}}, {"cpu.fusedbatchnormalization.channels"},
                              /*optimize=*/true);
    }
  }
}

// Split as oneDNN reorders from sub-memory views: a channels-last convolution output split along
// channels into uneven parts and consumed by convolutions (YOLOv8's C2f) with no conversion to
// plain, plain inputs along other axes (equal parts and the split attribute), and under bf16.
TEST(OneDnnKernelTest, SplitLayoutsAndAxes) {
  {
    ModelBuilder mb(13);
    mb.Input("x", kF32, {2, 8, 6, 5}).Output("y", kF32, {});
    mb.FloatInit("w", {12, 8, 1, 1}, Random(96, 140));
    mb.FloatInit("w2", {4, 5, 3, 3}, Random(180, 141));
    mb.Int64Init("parts", {3}, {3, 5, 4});
    mb.Node("Conv", {"x", "w"}, {"c"});
    ModelBuilder::IntAttr(mb.Node("Split", {"c", "parts"}, {"a", "b", "d"}), "axis", 1);
    ModelBuilder::IntsAttr(mb.Node("Conv", {"b", "w2"}, {"bb"}), "pads", {1, 1, 1, 1});
    ModelBuilder::IntAttr(mb.Node("Concat", {"a", "bb", "d"}, {"y"}), "axis", 1);
    const std::vector<NamedTensor> in = {{"x", RandomTensor({2, 8, 6, 5}, 142)}};
    CheckAgainstReference(mb.Bytes(), in, {"cpu.split.onednn"});
    auto s = Session::LoadFromBytes(mb.Bytes());
    ASSERT_TRUE(s.ok());
    auto plan = (*s)->DescribePlan(in);
    ASSERT_TRUE(plan.ok());
    // One conversion only: the graph output's (none around the Split).
    EXPECT_NE(plan->find("1 layout conversions"), std::string::npos) << *plan;
  }
  // Plain input: oneDNN above 64 KiB, the reference's copies below.
  for (const Shape& shape : {Shape{80, 60, 6}, Shape{4, 3, 6}}) {
    for (int64_t axis : {0, 2, -1}) {
      ModelBuilder mb(11);
      mb.Input("x", kF32, shape).Output("p", kF32, {}).Output("q", kF32, {});
      auto& n = mb.Node("Split", {"x"}, {"p", "q"});
      ModelBuilder::IntAttr(n, "axis", axis);
      if (axis == 2) ModelBuilder::IntsAttr(n, "split", {1, 5});
      SCOPED_TRACE(axis);
      CheckAgainstReference(mb.Bytes(), {{"x", RandomTensor(shape, 143)}},
                            {shape[0] == 80 ? "cpu.split.onednn" : "cpu.split.ref"});
    }
  }
}

}  // namespace
}  // namespace kiln
