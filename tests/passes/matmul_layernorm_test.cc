// fuse_matmul_add and fuse_layernorm: each graph runs with the optimizer off and on (same
// outputs), the op counts it leaves are asserted, and the cases it must leave alone are included.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace kiln::testing {
namespace {

TEST(FuseMatMulAddTest, LinearGeluAndLinear) {
  // ConvNeXt's MLP on channels-last input: Linear -> GELU -> Linear.
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 3, 3, 8}).Output("y", kF32, {-1, 3, 3, 8});
  RandomInit(m, "w1", {8, 16}, 100);
  RandomInit(m, "b1", {16}, 101);
  RandomInit(m, "w2", {16, 8}, 102);
  RandomInit(m, "b2", {1, 1, 8}, 103);
  m.Node("MatMul", {"x", "w1"}, {"m1"});
  m.Node("Add", {"b1", "m1"}, {"a1"});
  m.GeluErfForm("a1", "h");
  m.Node("MatMul", {"h", "w2"}, {"m2"});
  m.Node("Add", {"m2", "b2"}, {"y"});
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {}, &log);
  EXPECT_EQ(Ops(h, "kiln.FusedMatMul"), 2);
  EXPECT_EQ(h.size(), 1u) << ::testing::PrintToString(h);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 3, 3, 8}, 104)}});
}

TEST(FuseMatMulAddTest, RankOneAndRelu) {
  ModelBuilder m(13);
  m.Input("x", kF32, {4}).Output("y", kF32, {3});
  RandomInit(m, "w", {4, 3}, 110);
  RandomInit(m, "b", {1}, 111);  // broadcast along the last dim
  m.Node("MatMul", {"x", "w"}, {"mm"});
  m.Node("Add", {"mm", "b"}, {"a"});
  m.Node("Relu", {"a"}, {"y"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "kiln.FusedMatMul"), 1);
  EXPECT_EQ(h.size(), 1u);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({4}, 112)}});
}

TEST(FuseMatMulAddTest, DoesNotFire) {
  for (int variant = 0; variant < 4; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 2, 4}).Output("y", kF32, {-1, 2, 3});
    std::vector<NamedTensor> in = {{"x", RandomTensor({2, 2, 4}, 120)}};
    if (variant == 0) {
      m.Input("w", kF32, {4, 3});  // run-time weights
      in.push_back({"w", RandomTensor({4, 3}, 121)});
    } else {
      RandomInit(m, "w", {4, 3}, 121);
    }
    m.Node("MatMul", {"x", "w"}, {"mm"});
    if (variant == 1) {
      RandomInit(m, "b", {2, 3}, 122);  // varies along another dim
    } else if (variant == 3) {
      RandomInit(m, "b", {1, 1, 1, 3}, 122);  // would add a dim
    } else {
      RandomInit(m, "b", {3}, 122);
    }
    if (variant == 2) {
      m.Node("Add", {"mm", "b"}, {"a"});
      m.Node("Mul", {"a", "mm"}, {"y"});  // matmul output read twice
    } else {
      m.Node("Add", {"mm", "b"}, {"y"});
    }
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "kiln.FusedMatMul"), 0) << variant;
    EXPECT_EQ(Ops(h, "MatMul"), 1) << variant;
    ExpectSameOutputs(m.Bytes(), in);
  }
}

// A GELU no producer can absorb (after a MatMul of two inputs, as after ONNX Runtime's dynamic
// MatMulInteger -> Cast -> Mul -> Add) becomes one kiln.Gelu; not when an intermediate value is a
// graph output.
TEST(FuseGeluTest, StandaloneGelu) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder m(13);
    m.Input("a", kF32, {-1, 3, 4}).Input("b", kF32, {4, 5}).Output("y", kF32, {-1, 3, 5});
    m.Node("MatMul", {"a", "b"}, {"h"});
    m.GeluErfForm("h", "y");
    if (variant == 1) m.Output("y_g2", kF32, {-1, 3, 5});  // Erf's output read outside
    std::vector<std::string> log;
    auto h = OptimizedOps(m.Bytes(), {}, &log);
    SCOPED_TRACE(variant);
    EXPECT_EQ(Ops(h, "kiln.Gelu"), variant == 1 ? 0 : 1) << ::testing::PrintToString(h);
    EXPECT_EQ(Ops(h, "Erf"), variant == 1 ? 1 : 0);
    ExpectSameOutputs(m.Bytes(),
                      {{"a", RandomTensor({2, 3, 4}, 140)}, {"b", RandomTensor({4, 5}, 141)}});
    if (variant == 2) {
      // The fused graph's kernel: one oneDNN eltwise (gelu_erf) in place of five steps.
      SessionOptions o;
      auto session = Session::LoadFromBytes(m.Bytes(), o);
      ASSERT_TRUE(session.ok());
      auto plan = (*session)->DescribePlan(
          {{"a", RandomTensor({64, 3, 4}, 142)}, {"b", RandomTensor({4, 5}, 143)}});
      ASSERT_TRUE(plan.ok());
      EXPECT_NE(plan->find("cpu.gelu."), std::string::npos) << *plan;
    }
  }
}

// PyTorch's opset-13 LayerNorm over the last dim; gamma/beta as initializers, eps and the exponent
// as Constant nodes.
void DecomposedLayerNorm(ModelBuilder& m, const std::string& x, const std::string& y, bool affine,
                         int64_t axis = -1) {
  auto mean = [&](const std::string& in, const std::string& out) {
    ModelBuilder::IntsAttr(m.Node("ReduceMean", {in}, {out}), "axes", {axis});
  };
  mean(x, "ln_m");
  m.Node("Sub", {x, "ln_m"}, {"ln_d"});
  ConstantNode(m, "ln_two", {}, {2.f});
  m.Node("Pow", {"ln_d", "ln_two"}, {"ln_d2"});
  mean("ln_d2", "ln_v");
  ConstantNode(m, "ln_eps", {}, {1e-6f});
  m.Node("Add", {"ln_v", "ln_eps"}, {"ln_ve"});
  m.Node("Sqrt", {"ln_ve"}, {"ln_s"});
  if (!affine) {
    m.Node("Div", {"ln_d", "ln_s"}, {y});
    return;
  }
  m.Node("Div", {"ln_d", "ln_s"}, {"ln_n"});
  RandomInit(m, "ln_gamma", {6}, 130, 0.5f, 1.5f);
  RandomInit(m, "ln_beta", {6}, 131);
  m.Node("Mul", {"ln_n", "ln_gamma"}, {"ln_g"});
  m.Node("Add", {"ln_g", "ln_beta"}, {y});
}

TEST(FuseLayerNormTest, AffineAndPlain) {
  for (bool affine : {true, false}) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 3, 6}).Output("y", kF32, {-1, 3, 6});
    DecomposedLayerNorm(m, "x", "y", affine);
    std::vector<std::string> log;
    auto h = OptimizedOps(m.Bytes(), {}, &log);
    EXPECT_EQ(Ops(h, "kiln.LayerNormalization"), 1) << affine;
    EXPECT_EQ(h.size(), 1u) << ::testing::PrintToString(h);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 3, 6}, 132)}});
  }
}

TEST(FuseLayerNormTest, DoesNotFire) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder m(13);
    m.Input("x", kF32, {2, 6, 6}).Output("y", kF32, {2, 6, 6});
    DecomposedLayerNorm(m, "x", "y", true, variant == 0 ? 1 : -1);  // 0: not the last axis
    if (variant == 1) m.Output("ln_d", kF32, {2, 6, 6});  // an intermediate is a graph output
    if (variant == 2) m.Output("ln_v", kF32, {2, 6, 1});
    auto h = OptimizedOps(m.Bytes());
    EXPECT_EQ(Ops(h, "kiln.LayerNormalization"), 0) << variant;
    EXPECT_EQ(Ops(h, "ReduceMean"), 2) << variant;
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 6, 6}, 133)}});
  }
}

}  // namespace
}  // namespace kiln::testing
