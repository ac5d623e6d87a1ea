// eliminate_identity, fold_constants and the pass manager: each graph runs with the optimizer off
// and on (same outputs), the op counts it leaves are asserted, and the cases it must leave alone
// are included.
#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace kiln::testing {
namespace {

TEST(EliminateIdentityTest, RemovesChainsAndKeepsGraphOutputName) {
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 3}).Output("y", kF32, {-1, 3}).Output("z", kF32, {-1, 3});
  m.Node("Relu", {"x"}, {"r"});
  m.Node("Identity", {"r"}, {"i1"});
  m.Node("Dropout", {"i1"}, {"i2"});
  m.Node("Identity", {"i2"}, {"y"});
  m.Node("Sigmoid", {"y"}, {"s"});  // reads the graph output
  auto& c = m.Node("Cast", {"s"}, {"z"});
  ModelBuilder::IntAttr(c, "to", onnx::TensorProto::FLOAT);
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {}, &log);
  EXPECT_EQ(Ops(h, "Identity"), 0);
  EXPECT_EQ(Ops(h, "Dropout"), 0);
  EXPECT_EQ(Ops(h, "Cast"), 0);
  EXPECT_EQ(Ops(h, "Relu"), 1);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("pass eliminate_identity: removed 2 Identity, 1 Dropout, 1 no-op Cast, 0 "
                        "no-op Pad"),
            std::string::npos)
      << log[0];
  auto out = RunModel(m.Bytes(), {{"x", RandomTensor({2, 3}, 1)}}, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "y");
  EXPECT_EQ(out[1].name, "z");
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 3}, 1)}});
}

TEST(EliminateIdentityTest, KeepsWhatItMustKeep) {
  ModelBuilder m(13);
  m.Input("x", kF32, {2, 3})
      .Output("y", kF32, {2, 3})
      .Output("mask", onnx::TensorProto::BOOL, {2, 3});
  m.Output("r", kF32, {2, 3})
      .Output("r2", kF32, {2, 3})
      .Output("c", onnx::TensorProto::INT64, {2, 3});
  m.Node("Identity", {"x"}, {"y"});         // graph input -> graph output: stays
  m.Node("Dropout", {"x"}, {"d", "mask"});  // mask is used: stays
  m.Node("Relu", {"d"}, {"r"});             // r is a graph output ...
  m.Node("Identity", {"r"}, {"r2"});        // ... so this Identity stays
  auto& c = m.Node("Cast", {"x"}, {"c"});   // a real conversion: stays
  ModelBuilder::IntAttr(c, "to", onnx::TensorProto::INT64);
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "Identity"), 2);
  EXPECT_EQ(Ops(h, "Dropout"), 1);
  EXPECT_EQ(Ops(h, "Cast"), 1);
}

TEST(EliminateIdentityTest, DropoutInTrainingModeStays) {
  ModelBuilder m(13);
  m.Input("x", kF32, {2, 3}).Input("t", onnx::TensorProto::BOOL, {}).Output("y", kF32, {2, 3});
  m.Node("Dropout", {"x", "", "t"}, {"d"});
  m.Node("Relu", {"d"}, {"y"});
  EXPECT_EQ(Ops(OptimizedOps(m.Bytes()), "Dropout"), 1);
}

// Pads of all zeros (the constant input from opset 11, the attribute before) are removed; a
// real pad, and pads that are not a constant, stay.
TEST(EliminateIdentityTest, RemovesNoOpPads) {
  ModelBuilder m(13);
  m.Input("x", kF32, {1, 2, 4, 4}).Input("p", onnx::TensorProto::INT64, {8});
  m.Output("y", kF32, {}).Output("z", kF32, {}).Output("w", kF32, {});
  m.Int64Init("zero", {8}, {0, 0, 0, 0, 0, 0, 0, 0});
  m.Int64Init("one", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  m.Node("Pad", {"x", "zero"}, {"a"});
  m.Node("Relu", {"a"}, {"y"});
  m.Node("Pad", {"x", "one"}, {"z"});
  m.Node("Pad", {"x", "p"}, {"w"});
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {}, &log);
  EXPECT_EQ(Ops(h, "Pad"), 2);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("1 no-op Pad"), std::string::npos) << log[0];
  Tensor p = Tensor::FromVector<int64_t>({0, 0, 1, 0, 0, 0, 0, 1}, {8});
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({1, 2, 4, 4}, 4)}, {"p", p}});

  ModelBuilder old(10);
  old.Input("x", kF32, {1, 2, 4, 4}).Output("y", kF32, {}).Output("z", kF32, {});
  ModelBuilder::IntsAttr(old.Node("Pad", {"x"}, {"a"}), "pads", {0, 0, 0, 0, 0, 0, 0, 0});
  old.Node("Relu", {"a"}, {"y"});
  ModelBuilder::IntsAttr(old.Node("Pad", {"x"}, {"z"}), "pads", {0, 0, 2, 0, 0, 0, 0, 0});
  EXPECT_EQ(Ops(OptimizedOps(old.Bytes()), "Pad"), 1);
  ExpectSameOutputs(old.Bytes(), {{"x", RandomTensor({1, 2, 4, 4}, 5)}});
}

// Pow(x, 2) with a constant exponent becomes Mul(x, x); another exponent, or one that is not a
// constant, stays Pow.
TEST(EliminateIdentityTest, SquaresBecomeMultiplies) {
  ModelBuilder m(13);
  m.Input("x", kF32, {2, 5}).Input("e", kF32, {});
  m.Output("y", kF32, {}).Output("z", kF32, {}).Output("w", kF32, {});
  m.FloatInit("two", {}, {2.f});
  m.FloatInit("three", {}, {3.f});
  m.Node("Pow", {"x", "two"}, {"y"});
  m.Node("Pow", {"x", "three"}, {"z"});
  m.Node("Pow", {"x", "e"}, {"w"});
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {}, &log);
  EXPECT_EQ(Ops(h, "Pow"), 2);
  EXPECT_EQ(Ops(h, "Mul"), 1);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("1 Pow(x, 2) -> Mul(x, x)"), std::string::npos) << log[0];
  ExpectSameOutputs(m.Bytes(),
                    {{"x", RandomTensor({2, 5}, 6)}, {"e", Tensor::FromVector<float>({2.f}, {})}});
}

TEST(EliminateIdentityTest, CollapsesReshapeChains) {
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 2, 6}).Output("y", kF32, {-1, 4, 3});
  m.Int64Init("s1", {2}, {-1, 12});
  m.Int64Init("s2", {3}, {-1, 4, 3});
  m.Node("Reshape", {"x", "s1"}, {"a"});
  m.Node("Reshape", {"a", "s2"}, {"y"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "Reshape"), 1);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({3, 2, 6}, 2)}});
}

TEST(EliminateIdentityTest, ReshapeChainsItMustKeep) {
  // A 0 in the second shape copies a dim of the intermediate shape: not collapsible.
  ModelBuilder m(13);
  m.Input("x", kF32, {2, 2, 6}).Output("y", kF32, {4, 0}).Output("b", kF32, {4, 6});
  m.Int64Init("s1", {2}, {4, 6});
  m.Int64Init("s2", {2}, {0, -1});
  m.Int64Init("s3", {2}, {6, 4});
  m.Node("Reshape", {"x", "s1"}, {"a"});
  m.Node("Reshape", {"a", "s2"}, {"y"});
  // `a2` feeds two Reshapes: kept.
  m.Node("Reshape", {"x", "s1"}, {"a2"});
  m.Node("Reshape", {"a2", "s3"}, {"t"});
  m.Node("Reshape", {"t", "s1"}, {"u"});
  m.Node("Add", {"a2", "u"}, {"b"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "Reshape"), 4);  // t -> u collapsed; the others kept
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2, 2, 6}, 3)}});
}

TEST(FoldConstantsTest, ConstantWeightsAndConstantChains) {
  ModelBuilder m(13);
  m.Input("x", kF32, {1, 2, 5, 5}).Output("y", kF32, {1, 3, 5, 5});
  ConstantNode(m, "w0", {3, 2, 3, 3}, RandomValues(54, 4));  // Paddle-style weights
  ConstantNode(m, "scale", {}, {0.5f});
  m.Node("Mul", {"w0", "scale"}, {"w"});
  m.Node("Identity", {"w"}, {"w_id"});
  auto& conv = m.Node("Conv", {"x", "w_id"}, {"c"});
  ModelBuilder::IntsAttr(conv, "pads", {1, 1, 1, 1});
  m.FloatInit("one", {}, {1.f});
  m.Node("Add", {"c", "one"}, {"y"});  // not constant: stays (fuse_conv_bn, off, would fold it)
  std::vector<std::string> log;
  auto h = OptimizedOps(m.Bytes(), {"fuse_conv_activation", "fuse_conv_bn"}, &log);
  EXPECT_EQ(Ops(h, "Constant"), 0);
  EXPECT_EQ(Ops(h, "Mul"), 0);
  EXPECT_EQ(Ops(h, "Identity"), 0);
  EXPECT_EQ(Ops(h, "Conv"), 1);
  EXPECT_EQ(Ops(h, "Add"), 1);
  bool logged = false;
  for (const auto& l : log)
    logged = logged || l.find(
                           "pass fold_constants: 2 Constant nodes became constants, 1 nodes "
                           "evaluated") != std::string::npos;
  EXPECT_TRUE(logged) << ::testing::PrintToString(log);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({1, 2, 5, 5}, 5)}});
}

TEST(FoldConstantsTest, ConstantGraphOutput) {
  ModelBuilder m(13);
  m.Input("x", kF32, {2}).Output("y", kF32, {2}).Output("k", kF32, {2});
  ConstantNode(m, "c", {2}, {1.f, 2.f});
  m.Node("Neg", {"c"}, {"k"});
  m.Node("Add", {"x", "k"}, {"y"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "Neg"), 0);
  EXPECT_EQ(Ops(h, "Constant"), 0);
  auto out = RunModel(m.Bytes(), {{"x", RandomTensor({2}, 6)}}, {});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].name, "k");
  EXPECT_EQ(out[1].tensor.data<float>()[1], -2.f);
  ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({2}, 6)}});
}

TEST(PassManagerTest, DisabledAndUnknownPasses) {
  ModelBuilder m(13);
  m.Input("x", kF32, {2, 3}).Output("y", kF32, {2, 3});
  m.Node("Identity", {"x"}, {"i"});
  m.Node("Relu", {"i"}, {"y"});
  EXPECT_EQ(Ops(OptimizedOps(m.Bytes(), {"eliminate_identity"}), "Identity"), 1);
  SessionOptions o;
  o.disabled_passes = {"no_such_pass"};
  auto s = Session::LoadFromBytes(m.Bytes(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'no_such_pass'"), std::string::npos);
  auto on = Session::LoadFromBytes(m.Bytes());
  ASSERT_TRUE(on.ok());
  ASSERT_EQ((*on)->optimization_log().size(), 1u);
  EXPECT_EQ((*on)->optimization_log()[0].rfind("pass eliminate_identity: ", 0), 0u);
  o.optimize = false;
  auto off = Session::LoadFromBytes(m.Bytes(), o);  // names are not checked when off
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE((*off)->optimization_log().empty());
}

// reduce_mean_to_pool: ReduceMean over the spatial axes of a 4-D float tensor becomes
// GlobalAveragePool (and Flatten for keepdims 0): axes as an attribute, negative, or a constant
// input (opset 18); same outputs with the optimizer off and on. Other axes, another rank and
// axes only known at run time stay ReduceMean.
TEST(ReduceMeanToPoolTest, SpatialMeansBecomeGlobalAveragePool) {
  struct Case {
    int opset;
    std::vector<int64_t> axes;
    int keepdims;
    bool rewritten;
  };
  for (const Case& c :
       {Case{13, {2, 3}, 1, true}, Case{13, {-1, -2}, 0, true}, Case{18, {3, 2}, 0, true},
        Case{18, {2, 3}, 1, true}, Case{13, {1, 2}, 1, false}, Case{13, {2}, 0, false},
        Case{13, {3}, 1, false}}) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + " keepdims " + std::to_string(c.keepdims) +
                 " axes[0] " + std::to_string(c.axes[0]) + " of " + std::to_string(c.axes.size()));
    ModelBuilder m(c.opset);
    m.Input("x", kF32, {-1, 6, 5, 7}).OutputAnyShape("y", kF32);
    m.Node("Relu", {"x"}, {"r"});
    onnx::NodeProto* n = nullptr;
    if (c.opset >= 18) {
      m.Int64Init("axes", {static_cast<int64_t>(c.axes.size())}, c.axes);
      n = &m.Node("ReduceMean", {"r", "axes"}, {"y"});
    } else {
      n = &m.Node("ReduceMean", {"r"}, {"y"});
      ModelBuilder::IntsAttr(*n, "axes", c.axes);
    }
    ModelBuilder::IntAttr(*n, "keepdims", c.keepdims);
    std::vector<std::string> log;
    auto h = OptimizedOps(m.Bytes(), {}, &log);
    EXPECT_EQ(Ops(h, "GlobalAveragePool"), c.rewritten ? 1 : 0);
    EXPECT_EQ(Ops(h, "ReduceMean"), c.rewritten ? 0 : 1);
    EXPECT_EQ(Ops(h, "Flatten"), c.rewritten && c.keepdims == 0 ? 1 : 0);
    bool logged = false;
    for (const auto& line : log) logged = logged || line.find("reduce_mean_to_pool") == 5;
    EXPECT_EQ(logged, c.rewritten);
    ExpectSameOutputs(m.Bytes(), {{"x", RandomTensor({3, 6, 5, 7}, 9)}});
  }
  // A 3-D input and axes from a graph input stay.
  ModelBuilder m(18);
  m.Input("x", kF32, {2, 6, 5}).Input("axes", kI64, {2}).OutputAnyShape("y", kF32);
  m.OutputAnyShape("z", kF32);
  m.Node("ReduceMean", {"x", "axes"}, {"y"});
  m.Int64Init("a12", {2}, {1, 2});
  m.Node("ReduceMean", {"x", "a12"}, {"z"});
  auto h = OptimizedOps(m.Bytes());
  EXPECT_EQ(Ops(h, "ReduceMean"), 2);
}

}  // namespace
}  // namespace kiln::testing
