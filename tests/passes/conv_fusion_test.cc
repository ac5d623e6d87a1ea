// fuse_conv_bn, fuse_conv_add, fuse_conv_activation: each graph runs with the optimizer off and
// on (same outputs), the op counts it leaves are asserted, and the cases it must leave alone are
// included.
#include <gtest/gtest.h>

#include <functional>

#include "pass_test_util.h"

namespace kiln::testing {
namespace {

// Conv with 3x3 kernel and pads 1 (spatial size kept), weights `w` [m, c/group, 3, 3].
onnx::NodeProto& Conv3x3(ModelBuilder& m, const std::vector<std::string>& in,
                         const std::string& out, int64_t group = 1) {
  auto& n = m.Node("Conv", in, {out});
  ModelBuilder::IntsAttr(n, "pads", {1, 1, 1, 1});
  ModelBuilder::IntsAttr(n, "kernel_shape", {3, 3});
  if (group != 1) ModelBuilder::IntAttr(n, "group", group);
  return n;
}

// BatchNormalization parameters "<p>_scale", "<p>_b", "<p>_mean", "<p>_var" of size c.
std::vector<std::string> BnParams(ModelBuilder& m, const std::string& p, int64_t c, uint32_t s) {
  RandomInit(m, p + "_scale", {c}, s, 0.5f, 1.5f);
  RandomInit(m, p + "_b", {c}, s + 1);
  RandomInit(m, p + "_mean", {c}, s + 2);
  RandomInit(m, p + "_var", {c}, s + 3, 0.1f, 2.f);
  return {p + "_scale", p + "_b", p + "_mean", p + "_var"};
}

std::vector<std::string> With(std::vector<std::string> head, const std::vector<std::string>& t) {
  head.insert(head.end(), t.begin(), t.end());
  return head;
}

const std::vector<std::string> kOnlyBn = {"fuse_conv_add", "fuse_conv_activation"};

TEST(FuseConvBnTest, ConvWithAndWithoutBias) {
  for (bool bias : {true, false}) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 4, 6, 6}).Output("y", kF32, {-1, 6, 6, 6});
    RandomInit(m, "w", {6, 2, 3, 3}, 10);
    RandomInit(m, "b", {6}, 11);
    Conv3x3(m, bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"},
            "c", /*group=*/2);
    auto& bn = m.Node("BatchNormalization", With({"c"}, BnParams(m, "bn", 6, 12)), {"n"});
    FloatAttr(bn, "epsilon", 1e-3f);
    m.Node("Relu", {"n"}, {"y"});
    auto h = OptimizedOps(m.Bytes(), kOnlyBn);
    EXPECT_EQ(Ops(h, "BatchNormalization"), 0);
    EXPECT_EQ(Ops(h, "Conv"), 1);
    auto all = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(all, "BatchNormalization"), 0);
    EXPECT_EQ(Ops(all, "kiln.FusedConv"), 1);
    EXPECT_EQ(all.size(), 1u);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 6, 6}, 13)}}, kOnlyBn);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 6, 6}, 13)}});
  }
}

TEST(FuseConvBnTest, ConvTransposeGrouped) {
  ModelBuilder m(13);
  m.Input("x", kF32, {1, 4, 5, 5}).Output("y", kF32, {1, 6, 10, 10});
  RandomInit(m, "w", {4, 3, 2, 2}, 20);  // [C, M/group, k, k], group 2 -> M = 6
  auto& ct = m.Node("ConvTranspose", {"x", "w"}, {"c"});
  ModelBuilder::IntsAttr(ct, "strides", {2, 2});
  ModelBuilder::IntAttr(ct, "group", 2);
  m.Node("BatchNormalization", With({"c"}, BnParams(m, "bn", 6, 21)), {"y"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "BatchNormalization"), 0);
  EXPECT_EQ(Ops(h, "ConvTranspose"), 1);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({1, 4, 5, 5}, 22)}});
}

TEST(FuseConvBnTest, Gemm) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 5}).Output("y", kF32, {-1, 7});
    RandomInit(m, "B", variant == 0 ? std::vector<int64_t>{7, 5} : std::vector<int64_t>{5, 7}, 30);
    std::vector<std::string> in = {"x", "B"};
    if (variant == 1) {
      RandomInit(m, "C", {7}, 31);
      in.push_back("C");
    } else if (variant == 2) {
      RandomInit(m, "C", {1}, 31);
      in.push_back("C");
    }
    auto& g = m.Node("Gemm", in, {"g"});
    if (variant == 0) ModelBuilder::IntAttr(g, "transB", 1);
    FloatAttr(g, "alpha", 0.7f);
    FloatAttr(g, "beta", 1.3f);
    m.Node("BatchNormalization", With({"g"}, BnParams(m, "bn", 7, 32)), {"y"});
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "BatchNormalization"), 0) << variant;
    EXPECT_EQ(Ops(h, "Gemm"), 1) << variant;
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({3, 5}, 33)}});
  }
}

// A Mul and an Add by a scalar or per-channel constant after a convolution (PP-LCNetV3's
// learnable affine) fold into its weights and bias, so the activation after them fuses; also
// after a ConvTranspose, and with the constant first.
TEST(FuseConvBnTest, ScalarAndPerChannelAffine) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 4, 6, 6}).Output("y", kF32, {});
    RandomInit(m, "b", {6}, 51);
    m.FloatInit("s", {}, {0.7f});
    RandomInit(m, "t",
               variant == 1 ? std::vector<int64_t>{1, 6, 1, 1} : std::vector<int64_t>{6, 1, 1}, 52);
    if (variant == 2) {
      RandomInit(m, "w", {4, 6, 2, 2}, 50);
      auto& ct = m.Node("ConvTranspose", {"x", "w", "b"}, {"c"});
      ModelBuilder::IntsAttr(ct, "strides", {2, 2});
    } else {
      RandomInit(m, "w", {6, 2, 3, 3}, 50);
      Conv3x3(m, {"x", "w", "b"}, "c", /*group=*/2);
    }
    m.Node("Mul", {"s", "c"}, {"m"});  // the constant first
    m.Node("Add", {"m", "t"}, {"a"});
    m.Node("Relu", {"a"}, {"y"});
    SCOPED_TRACE(variant);
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "Mul"), 0);
    EXPECT_EQ(Ops(h, "Add"), 0);
    if (variant < 2) {
      EXPECT_EQ(Ops(h, "kiln.FusedConv"), 1);
      EXPECT_EQ(h.size(), 1u);
    }
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 6, 6}, 53)}});
  }
}

// Constants that do not scale or shift whole channels stay: [C] (broadcast along W), [1, 1, H, W]
// (spatial), a computed operand, and a convolution output read elsewhere too.
TEST(FuseConvBnTest, AffineDoesNotFire) {
  for (int variant = 0; variant < 4; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {1, 4, 6, 6}).Output("y", kF32, {});
    RandomInit(m, "w", {6, 4, 3, 3}, 60);
    Conv3x3(m, {"x", "w"}, "c");
    if (variant == 0) RandomInit(m, "k", {6}, 61);
    if (variant == 1) RandomInit(m, "k", {1, 1, 6, 6}, 61);
    if (variant == 2) m.Input("k", kF32, {1, 6, 1, 1});
    if (variant == 3) RandomInit(m, "k", {1, 6, 1, 1}, 61);
    m.Node("Mul", {"c", "k"}, {"m"});
    if (variant == 3) {
      m.Node("Add", {"m", "c"}, {"y"});  // c read twice
    } else {
      m.Node("Relu", {"m"}, {"y"});
    }
    SCOPED_TRACE(variant);
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "Mul"), 1);
    std::vector<NamedTensor> in = {{"x", RandomTensor({1, 4, 6, 6}, 62)}};
    if (variant == 2) in.push_back({"k", RandomTensor({1, 6, 1, 1}, 63)});
    ExpectSameOutputs(m.Bytes(), in);
  }
}

TEST(FuseConvBnTest, DoesNotFire) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {1, 2, 4, 4}).Output("y", kF32, {1, 3, 4, 4});
    if (variant == 0) {
      m.Input("w", kF32, {3, 2, 3, 3});  // weights are not constant
    } else {
      RandomInit(m, "w", {3, 2, 3, 3}, 40);
    }
    Conv3x3(m, {"x", "w"}, "c");
    m.Node("BatchNormalization", With({"c"}, BnParams(m, "bn", 3, 41)), {"n"});
    if (variant == 1) {
      m.Node("Add", {"n", "c"}, {"y"});  // the conv output is read twice
    } else if (variant == 2) {
      m.Output("c", kF32, {1, 3, 4, 4});  // the conv output is a graph output
      m.Node("Relu", {"n"}, {"y"});
    } else {
      m.Node("Relu", {"n"}, {"y"});
    }
    // (A BN -> Relu left unfolded is then fused by fuse_bn_activation; off here.)
    auto h = OptimizedOps(m.Bytes(), {"fuse_bn_activation"});
    EXPECT_EQ(Ops(h, "BatchNormalization"), 1) << variant;
    std::vector<NamedTensor> in = {{"x", RandomTensor({1, 2, 4, 4}, 42)}};
    if (variant == 0) in.push_back({"w", RandomTensor({3, 2, 3, 3}, 43)});
    ExpectSameOutputs(m.Bytes(), in);
  }
}

// ResNet basic block: relu(conv2(relu(conv1(x))) + x), and its downsampling variant
// relu(conv2(...) + conv_ds(x)).
TEST(FuseConvAddTest, ResNetBlocks) {
  for (bool downsample : {false, true}) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 4, 6, 6}).Output("y", kF32, {-1, 4, 6, 6});
    RandomInit(m, "w1", {4, 4, 3, 3}, 50);
    RandomInit(m, "w2", {4, 4, 3, 3}, 51);
    RandomInit(m, "b2", {4}, 52);
    Conv3x3(m, {"x", "w1"}, "c1");
    m.Node("Relu", {"c1"}, {"r1"});
    Conv3x3(m, {"r1", "w2", "b2"}, "c2");
    std::string skip = "x";
    if (downsample) {
      RandomInit(m, "wd", {4, 4, 1, 1}, 53);
      m.Node("Conv", {"x", "wd"}, {"d"});
      skip = "d";
    }
    m.Node("Add", {"c2", skip}, {"s"});
    m.Node("Relu", {"s"}, {"y"});
    std::vector<std::string> log;
    auto h = OptimizedOps(m.Bytes(), {}, &log);
    EXPECT_EQ(Ops(h, "Add"), 0);
    EXPECT_EQ(Ops(h, "Relu"), 0);
    // With two conv operands the later conv (the downsampling one) takes the other as Z; the
    // main-path conv then feeds the FusedConv and stays a Conv.
    EXPECT_EQ(Ops(h, "Conv"), downsample ? 1 : 0);
    EXPECT_EQ(Ops(h, "kiln.FusedConv"), 2);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 6, 6}, 54)}});
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 6, 6}, 54)}}, {"fuse_conv_activation"});
  }
}

// MobileNetV2's linear bottleneck: conv output + x with no activation.
TEST(FuseConvAddTest, AddWithoutActivation) {
  ModelBuilder m(13);
  m.Input("x", kF32, {1, 3, 5, 5}).Output("y", kF32, {1, 3, 5, 5});
  RandomInit(m, "w", {3, 3, 1, 1}, 60);
  m.Node("Conv", {"x", "w"}, {"c"});
  m.Node("Add", {"x", "c"}, {"y"});  // conv output as the second operand, graph output after
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "Add"), 0);
  EXPECT_EQ(Ops(h, "kiln.FusedConv"), 1);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({1, 3, 5, 5}, 61)}});
}

TEST(FuseConvAddTest, DoesNotFire) {
  for (int variant = 0; variant < 5; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 3, 5, 5}).Output("y", kF32, {-1, 3, 5, 5});
    RandomInit(m, "w", {3, 3, 3, 3}, 70);
    Conv3x3(m, {"x", "w"}, "c");
    std::vector<NamedTensor> in = {{"x", RandomTensor({2, 3, 5, 5}, 71)}};
    if (variant == 0) {  // Conv -> Relu -> Add: the activation comes before the residual
      m.Node("Relu", {"c"}, {"r"});
      m.Node("Add", {"r", "x"}, {"y"});
    } else if (variant == 1) {  // broadcast summand
      RandomInit(m, "bias", {1, 3, 1, 1}, 72);
      m.Node("Add", {"c", "bias"}, {"y"});
    } else if (variant == 2) {  // conv output read twice
      m.Node("Add", {"c", "x"}, {"a"});
      m.Node("Mul", {"a", "c"}, {"y"});
    } else if (variant == 3) {  // summand with another batch symbol: shapes may differ
      m.Input("z", kF32, {-1, 3, 5, 5});
      m.InputDimParam(1, 0, "M");
      m.Node("Add", {"c", "z"}, {"y"});
      in.push_back({"z", RandomTensor({2, 3, 5, 5}, 73)});
    } else {  // summand whose shape is unknown
      m.Input("z", kF32, {});
      m.proto()
          .mutable_graph()
          ->mutable_input(1)
          ->mutable_type()
          ->mutable_tensor_type()
          ->clear_shape();
      m.Node("Add", {"c", "z"}, {"y"});
      in.push_back({"z", RandomTensor({2, 3, 5, 5}, 74)});
    }
    // (fuse_conv_bn folds variant 1's constant per-channel Add into the bias: off here.)
    auto h = OptimizedOps(m.Bytes(), {"fuse_conv_bn"});
    EXPECT_EQ(Ops(h, "Add"), 1) << variant;
    ExpectSameOutputs(m.Bytes(), in);
  }
}

struct ActCase {
  const char* name;
  int opset;
  std::function<void(ModelBuilder&)> build;  // from "c" to "y"
  const char* activation;
};

std::vector<ActCase> ActivationCases() {
  auto unary = [](const char* op) { return [op](ModelBuilder& m) { m.Node(op, {"c"}, {"y"}); }; };
  auto gelu = [](int order) {
    return [order](ModelBuilder& m) {
      if (order == 0) {
        m.GeluErfForm("c", "y");
        return;
      }
      m.FloatInit("sqrt2", {}, {1.4142135381698608f});
      m.FloatInit("one", {}, {1.f});
      m.FloatInit("half", {}, {0.5f});
      m.Node("Div", {"c", "sqrt2"}, {"g1"});
      m.Node("Erf", {"g1"}, {"g2"});
      m.Node("Add", {"g2", "one"}, {"g3"});
      m.Node("Mul", {"c", "half"}, {"g4"});  // the other order: (x * 0.5) * (1 + erf)
      m.Node("Mul", {"g4", "g3"}, {"y"});
    };
  };
  return {
      {"Relu", 13, unary("Relu"), "Relu"},
      {"Sigmoid", 13, unary("Sigmoid"), "Sigmoid"},
      {"Tanh", 13, unary("Tanh"), "Tanh"},
      {"HardSwish", 14, unary("HardSwish"), "HardSwish"},
      {"LeakyRelu", 13,
       [](ModelBuilder& m) { FloatAttr(m.Node("LeakyRelu", {"c"}, {"y"}), "alpha", 0.2f); },
       "LeakyRelu"},
      // Without alpha: the fused kernel must use ONNX's 0.01 as the reference does.
      {"LeakyReluDefault", 13, unary("LeakyRelu"), "LeakyRelu"},
      {"Elu", 13, [](ModelBuilder& m) { FloatAttr(m.Node("Elu", {"c"}, {"y"}), "alpha", 0.5f); },
       "Elu"},
      {"EluDefault", 13, unary("Elu"), "Elu"},
      {"HardSigmoid", 13,
       [](ModelBuilder& m) {
         auto& n = m.Node("HardSigmoid", {"c"}, {"y"});
         FloatAttr(n, "alpha", 0.3f);
         FloatAttr(n, "beta", 0.4f);
       },
       "HardSigmoid"},
      {"Clip11", 13,
       [](ModelBuilder& m) {
         m.FloatInit("lo", {}, {0.f});
         ConstantNode(m, "hi", {}, {0.5f});
         m.Node("Clip", {"c", "lo", "hi"}, {"y"});
       },
       "Clip"},
      {"Clip6", 9,
       [](ModelBuilder& m) {
         auto& n = m.Node("Clip", {"c"}, {"y"});
         FloatAttr(n, "min", -0.2f);
         FloatAttr(n, "max", 0.3f);
       },
       "Clip"},
      {"Silu", 13,
       [](ModelBuilder& m) {
         m.Node("Sigmoid", {"c"}, {"s"});
         m.Node("Mul", {"s", "c"}, {"y"});
       },
       "Silu"},
      {"HardSwishOpset13", 13,
       [](ModelBuilder& m) {
         auto& n = m.Node("HardSigmoid", {"c"}, {"s"});
         FloatAttr(n, "alpha", 1.f / 6.f);
         m.Node("Mul", {"c", "s"}, {"y"});
       },
       "HardSwish"},
      {"GeluMulFirst", 13, gelu(0), "Gelu"},
      {"GeluHalfFirst", 13, gelu(1), "Gelu"},
  };
}

TEST(FuseConvActivationTest, EveryActivation) {
  for (const ActCase& c : ActivationCases()) {
    SCOPED_TRACE(c.name);
    ModelBuilder m(c.opset);
    m.Input("x", kF32, {-1, 2, 5, 5}).Output("y", kF32, {-1, 3, 5, 5});
    RandomInit(m, "w", {3, 2, 3, 3}, 80);
    RandomInit(m, "b", {3}, 81);
    Conv3x3(m, {"x", "w", "b"}, "c");
    c.build(m);
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "kiln.FusedConv"), 1);
    EXPECT_EQ(h.size(), 1u) << ::testing::PrintToString(h);
    auto g = onnxio::LoadModelFromBytes(m.Bytes(), "");
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE(passes::RunDefaultPasses(**g, {}, nullptr).ok());
    ASSERT_EQ((*g)->nodes.size(), 1u);
    EXPECT_EQ((*g)->nodes[0].GetString("activation", "?"), c.activation);
    EXPECT_EQ((*g)->opset_imports["kiln"], 1);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 2, 5, 5}, 82, -4.f, 4.f)}});
  }
}

TEST(FuseConvActivationTest, DoesNotFire) {
  for (int variant = 0; variant < 4; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {1, 2, 5, 5}).Output("y", kF32, {1, 3, 5, 5});
    RandomInit(m, "w", {3, 2, 3, 3}, 90);
    Conv3x3(m, {"x", "w"}, "c");
    std::vector<NamedTensor> in = {{"x", RandomTensor({1, 2, 5, 5}, 91)}};
    if (variant == 0) {  // Clip with a run-time min
      m.Input("lo", kF32, {});
      m.Node("Clip", {"c", "lo"}, {"y"});
      in.push_back({"lo", RandomTensor({}, 92)});
    } else if (variant == 1) {  // conv output is a graph output
      m.Output("c", kF32, {1, 3, 5, 5});
      m.Node("Relu", {"c"}, {"y"});
    } else if (variant == 2) {  // Silu whose Sigmoid output is read elsewhere too
      m.Output("s", kF32, {1, 3, 5, 5});
      m.Node("Sigmoid", {"c"}, {"s"});
      m.Node("Mul", {"c", "s"}, {"y"});
    } else {  // Gelu with the wrong constant
      m.GeluErfForm("c", "y", 1.5f);
    }
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "kiln.FusedConv"), 0) << variant;
    EXPECT_EQ(Ops(h, "Conv"), 1) << variant;
    ExpectSameOutputs(m.Bytes(), in);
  }
}

// fuse_bn_activation: DenseNet's pre-activation BN -> ReLU (after a Concat, not foldable into a
// convolution) becomes one FusedBatchNormalization; same outputs with the pass on and off.
TEST(FuseBnActivationTest, PreActivationBn) {
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 4, 5, 5}).Output("y", kF32, {-1, 3, 5, 5});
  RandomInit(m, "w", {3, 8, 3, 3}, 100);
  ModelBuilder::IntAttr(m.Node("Concat", {"x", "x"}, {"cat"}), "axis", 1);
  auto& bn = m.Node("BatchNormalization", With({"cat"}, BnParams(m, "bn", 8, 101)), {"n"});
  FloatAttr(bn, "epsilon", 1e-3f);
  m.Node("Relu", {"n"}, {"r"});
  Conv3x3(m, {"r", "w"}, "y");
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {}, &log);
  EXPECT_EQ(Ops(h, "kiln.FusedBatchNormalization"), 1);
  EXPECT_EQ(Ops(h, "BatchNormalization"), 0);
  EXPECT_EQ(Ops(h, "Relu"), 0);
  bool logged = false;
  for (const auto& l : log)
    logged |=
        l.find("fused 1 BatchNormalization+Relu into FusedBatchNormalization") != std::string::npos;
  EXPECT_TRUE(logged);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 4, 5, 5}, 102)}});
}

TEST(FuseBnActivationTest, DoesNotFire) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder m(15);
    m.Input("x", kF32, {1, 4, 5, 5}).Output("y", kF32, {1, 4, 5, 5});
    std::vector<NamedTensor> in = {{"x", RandomTensor({1, 4, 5, 5}, 110)}};
    m.Node("Sigmoid", {"x"}, {"s"});
    m.Node("BatchNormalization", With({"s"}, BnParams(m, "bn", 4, 111)), {"n"});
    if (variant == 0) {  // the normalized value is a graph output
      m.Output("n", kF32, {1, 4, 5, 5});
      m.Node("Relu", {"n"}, {"y"});
    } else if (variant == 1) {  // read by another node too
      m.Node("Relu", {"n"}, {"r"});
      m.Node("Add", {"r", "n"}, {"y"});
    } else {  // followed by something other than Relu
      m.Node("Tanh", {"n"}, {"y"});
    }
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "kiln.FusedBatchNormalization"), 0) << variant;
    EXPECT_EQ(Ops(h, "BatchNormalization"), 1) << variant;
    ExpectSameOutputs(m.Bytes(), in);
  }
}

}  // namespace
}  // namespace kiln::testing
