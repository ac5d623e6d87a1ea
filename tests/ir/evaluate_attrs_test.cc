// The one node evaluator (ir/evaluate.h), kiln's one Activation type (ops/activation.h) and the
// typed attributes ops hand to kernels (each in its op's header: ops/nn/conv.h, ops/nn/gemm.h,
// ops/nn/pool.h, ops/axis_attrs.h).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>

#include "ir/evaluate.h"
#include "ops/activation.h"
#include "ops/axis_attrs.h"
#include "ops/nn/conv.h"
#include "ops/nn/gemm.h"
#include "ops/nn/pool.h"
#include "passes/graph_edit.h"

namespace kiln {
namespace {

using passes::FloatAttr;
using passes::IntAttr;
using passes::StringAttr;

ir::Node MakeNode(const std::string& op, int opset, int inputs, int outputs,
                  const std::string& domain = "") {
  ir::Node n;
  n.name = "n";
  n.op_type = op;
  n.domain = domain;
  n.opset = opset;
  for (int i = 0; i < inputs; ++i) n.inputs.push_back(i);
  for (int o = 0; o < outputs; ++o) n.outputs.push_back(inputs + o);
  return n;
}

ir::Attribute IntsAttr(std::vector<int64_t> v) {
  ir::Attribute a;
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}

std::unique_ptr<ir::Op> Create(const ir::Node& n) {
  const ir::OpDef* def = ir::OpRegistry::Global().Find(n.domain, n.op_type, n.opset);
  EXPECT_NE(def, nullptr) << n.op_type;
  if (def == nullptr) return nullptr;
  auto op = def->create(n);
  EXPECT_TRUE(op.ok()) << op.status().ToString();
  return op.ok() ? std::move(*op) : nullptr;
}

TEST(EvaluateNodeTest, InfersWithoutValuesAndComputesWithThem) {
  const ir::Node n = MakeNode("Add", 14, 2, 1);
  auto op = Create(n);
  ASSERT_NE(op, nullptr);
  const Tensor a = Tensor::FromVector<float>({1, 2, 3}, {3});
  const Tensor b = Tensor::FromVector<float>({10}, {1});

  ir::NodeInputs shapes_only;
  shapes_only.Add(DataType::kFloat, {3}, nullptr);
  shapes_only.Add(DataType::kFloat, {1}, &b);
  ir::NodeEvaluation ev;
  ASSERT_TRUE(ir::EvaluateNode(n, *op, shapes_only, {}, &ev).ok());
  EXPECT_EQ(ev.dtypes[0], DataType::kFloat);
  EXPECT_EQ(ev.shapes[0], (Shape{3}));
  EXPECT_FALSE(ev.all_values);
  EXPECT_FALSE(ev.computed);

  ir::NodeInputs both;
  both.Add(DataType::kFloat, {3}, &a);
  both.Add(DataType::kFloat, {1}, &b);
  ASSERT_TRUE(ir::EvaluateNode(n, *op, both, {}, &ev).ok());
  ASSERT_TRUE(ev.computed);
  ASSERT_TRUE(ev.values[0].defined());
  EXPECT_EQ(ev.values[0].data<float>()[2], 13.f);

  // Shapes only when the caller says so, or when the limits say no.
  ASSERT_TRUE(ir::EvaluateNode(n, *op, both, ir::EvalPolicy{.compute = false}, &ev).ok());
  EXPECT_FALSE(ev.computed);
  ir::EvalPolicy small;
  small.max_output_elements = 2;
  ASSERT_TRUE(ir::EvaluateNode(n, *op, both, small, &ev).ok());
  EXPECT_FALSE(ev.computed);
  EXPECT_FALSE(ev.values[0].defined());
  small = {};
  small.max_input_elements = 3;
  ASSERT_TRUE(ir::EvaluateNode(n, *op, both, small, &ev).ok());
  EXPECT_FALSE(ev.computed);
}

TEST(EvaluateNodeTest, ValuesInferenceGivesNeedNoCompute) {
  const ir::Node n = MakeNode("Shape", 13, 1, 1);
  auto op = Create(n);
  ASSERT_NE(op, nullptr);
  ir::NodeInputs in;
  in.Add(DataType::kFloat, {2, 5}, nullptr);
  ir::NodeEvaluation ev;
  ASSERT_TRUE(ir::EvaluateNode(n, *op, in, {}, &ev).ok());
  EXPECT_TRUE(ev.all_values);
  EXPECT_FALSE(ev.computed);
  EXPECT_EQ(ev.values[0].data<int64_t>()[1], 5);
}

TEST(EvaluateNodeTest, ShapeInputsWithoutValuesNeedARun) {
  const ir::Node n = MakeNode("Reshape", 14, 2, 1);
  auto op = Create(n);
  ASSERT_NE(op, nullptr);
  ir::NodeInputs in;
  in.Add(DataType::kFloat, {2, 6}, nullptr);
  in.Add(DataType::kInt64, {2}, nullptr);
  EXPECT_TRUE(ir::NeedsRuntimeValues(n, *op, in));
  const Tensor shape = Tensor::FromVector<int64_t>({3, 4}, {2});
  in.values[1] = &shape;
  EXPECT_FALSE(ir::NeedsRuntimeValues(n, *op, in));
}

TEST(EvaluateNodeTest, ErrorsNameTheNode) {
  const ir::Node n = MakeNode("Add", 14, 2, 1);
  auto op = Create(n);
  ASSERT_NE(op, nullptr);
  ir::NodeInputs in;
  in.Add(DataType::kFloat, {3}, nullptr);
  in.Add(DataType::kFloat, {4}, nullptr);
  ir::NodeEvaluation ev;
  const Status s = ir::EvaluateNode(n, *op, in, {}, &ev);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("Add node 'n'"), std::string::npos) << s.ToString();
}

// The defaults of each activation come from one place: a node without parameters, the fused
// form without `activation_alpha`, and the ONNX spec agree (LeakyRelu 0.01 was 0 in the fused
// CPU kernels once).
TEST(ActivationTest, DefaultsAgreeEverywhere) {
  ops::Activation standalone, fused;
  ir::Node leaky = MakeNode("LeakyRelu", 16, 1, 1);
  ASSERT_TRUE(ops::ActivationOfNode(leaky, {}, &standalone));
  ir::Node conv = MakeNode("FusedConv", 1, 2, 1, "kiln");
  conv.attrs["activation"] = StringAttr("LeakyRelu");
  ASSERT_TRUE(ops::ParseActivation(conv, &fused).ok());
  EXPECT_EQ(standalone.kind, ops::ActivationKind::kLeakyRelu);
  EXPECT_EQ(standalone.alpha, 0.01f);
  EXPECT_EQ(fused.alpha, 0.01f);

  ir::Node hs = MakeNode("HardSigmoid", 6, 1, 1);
  ASSERT_TRUE(ops::ActivationOfNode(hs, {}, &standalone));
  EXPECT_EQ(standalone.alpha, 0.2f);
  EXPECT_EQ(standalone.beta, 0.5f);

  ir::Node elu = MakeNode("Elu", 6, 1, 1);
  ASSERT_TRUE(ops::ActivationOfNode(elu, {}, &standalone));
  EXPECT_EQ(standalone.alpha, 1.f);
  EXPECT_FLOAT_EQ(ops::Activate(standalone, -1.f), std::exp(-1.f) - 1.f);

  ir::Node clip = MakeNode("Clip", 13, 1, 1);
  ASSERT_TRUE(ops::ActivationOfNode(clip, {}, &standalone));
  EXPECT_EQ(standalone.alpha, -FLT_MAX);
  EXPECT_EQ(standalone.beta, FLT_MAX);
}

TEST(ActivationTest, ClipBoundsMustBeKnownScalars) {
  ir::Node clip = MakeNode("Clip", 13, 3, 1);
  ops::Activation act;
  EXPECT_FALSE(ops::ActivationOfNode(clip, {nullptr, nullptr, nullptr}, &act));
  const Tensor lo = Tensor::FromVector<float>({-1.f}, {});
  const Tensor hi = Tensor::FromVector<float>({6.f}, {});
  ASSERT_TRUE(ops::ActivationOfNode(clip, {nullptr, &lo, &hi}, &act));
  EXPECT_EQ(act.alpha, -1.f);
  EXPECT_EQ(act.beta, 6.f);
  const Tensor two = Tensor::FromVector<float>({0.f, 1.f}, {2});
  EXPECT_FALSE(ops::ActivationOfNode(clip, {nullptr, &two, &hi}, &act));
  ir::Node clip6 = MakeNode("Clip", 6, 1, 1);
  clip6.attrs["min"] = FloatAttr(0.f);
  clip6.attrs["max"] = FloatAttr(6.f);
  ASSERT_TRUE(ops::ActivationOfNode(clip6, {}, &act));
  EXPECT_EQ(act.beta, 6.f);
  EXPECT_FALSE(ops::ActivationOfNode(MakeNode("Add", 14, 2, 1), {}, &act));
}

TEST(ActivationTest, UnknownFusedActivationIsRefusedWithTheList) {
  ir::Node conv = MakeNode("FusedConv", 1, 2, 1, "kiln");
  conv.attrs["activation"] = StringAttr("Swish2");
  ops::Activation act;
  const Status s = ops::ParseActivation(conv, &act);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("got 'Swish2'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("LeakyRelu"), std::string::npos) << s.ToString();
}

TEST(OpAttrsTest, OpsHandTheirParsedAttributesToKernels) {
  ir::Node gemm = MakeNode("Gemm", 13, 3, 1);
  gemm.attrs["transB"] = IntAttr(1);
  gemm.attrs["alpha"] = FloatAttr(0.5f);
  auto op = Create(gemm);
  ASSERT_NE(op, nullptr);
  const auto* g = op->attrs<ops::GemmAttrs>();
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->trans_b);
  EXPECT_FALSE(g->trans_a);
  EXPECT_EQ(g->alpha, 0.5f);
  EXPECT_EQ(g->beta, 1.f);
  EXPECT_EQ(op->attrs<ops::ConvAttrs>(), nullptr);  // not a conv

  ir::Node fc = MakeNode("FusedConv", 1, 2, 1, "kiln");
  fc.attrs["group"] = IntAttr(2);
  fc.attrs["strides"] = IntsAttr({2, 2});
  fc.attrs["activation"] = StringAttr("Clip");
  fc.attrs["activation_beta"] = FloatAttr(6.f);
  op = Create(fc);
  ASSERT_NE(op, nullptr);
  const auto* c = op->attrs<ops::ConvAttrs>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->conv.group, 2);
  EXPECT_EQ(c->conv.window.strides, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c->act.kind, ops::ActivationKind::kClip);
  EXPECT_EQ(c->act.alpha, -FLT_MAX);
  EXPECT_EQ(c->act.beta, 6.f);

  // Softmax's axis default changed at opset 13; the op applies it, kernels see the result.
  op = Create(MakeNode("Softmax", 11, 1, 1));
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->attrs<ops::AxisAttrs>()->axis, 1);
  op = Create(MakeNode("Softmax", 13, 1, 1));
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->attrs<ops::AxisAttrs>()->axis, -1);

  ir::Node pool = MakeNode("AveragePool", 11, 1, 1);
  pool.attrs["kernel_shape"] = IntsAttr({3, 3});
  pool.attrs["count_include_pad"] = IntAttr(1);
  op = Create(pool);
  ASSERT_NE(op, nullptr);
  EXPECT_TRUE(op->attrs<ops::PoolAttrs>()->count_include_pad);
  EXPECT_FALSE(op->attrs<ops::PoolAttrs>()->ceil_mode);

  op = Create(MakeNode("LeakyRelu", 16, 1, 1));
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(op->attrs<ops::ActivationAttrs>()->act.alpha, 0.01f);
}

}  // namespace
}  // namespace kiln
