// Control flow (If, Loop, Scan) end to end: bodies that read values of the enclosing graph (one
// and two levels up), scan outputs, nesting, and the failures a malformed model or loop must give
// as clear errors. Every model runs twice, on the reference kernels (bodies interpreted) and on
// the CPU backend (bodies as nested plans, cpu.<op>.subplan), and both are checked against values
// computed here by hand.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/onnx_loader.h"
#include "passes/inline_if.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;
constexpr int kBool = onnx::TensorProto::BOOL;

using Body = ModelBuilder::Subgraph;
constexpr auto& GraphAttr = ModelBuilder::GraphAttr;

Tensor Floats(std::vector<float> v, Shape s) { return Tensor::FromVector<float>(v, s); }
Tensor Scalar64(int64_t v) { return Tensor::FromVector<int64_t>({v}, {}); }
Tensor Bool(bool v) {
  Tensor t = Tensor::Empty(DataType::kBool, {});
  t.data<bool>()[0] = v;
  return t;
}

// Runs the model on the reference kernels and on the CPU backend; both outputs are returned.
struct Both {
  std::vector<NamedTensor> ref, fast;
  std::string plan;
  Status ref_status, fast_status;
};
Both RunBoth(const std::string& bytes, const std::vector<NamedTensor>& inputs) {
  Both b;
  for (bool reference : {true, false}) {
    SessionOptions o;
    o.reference_only = reference;
    auto s = Session::LoadFromBytes(bytes, o);
    Status st = s.ok() ? OkStatus() : s.status();
    std::vector<NamedTensor> out;
    if (st.ok()) st = (*s)->Run(inputs, &out);
    if (st.ok() && !reference) {
      auto p = (*s)->DescribePlan(inputs);
      if (p.ok()) b.plan = *p;
    }
    (reference ? b.ref : b.fast) = out;
    (reference ? b.ref_status : b.fast_status) = st;
  }
  return b;
}

void ExpectFloats(const Tensor& t, const std::vector<float>& want, Shape shape) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.dtype(), DataType::kFloat);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(t.data<float>()[i], want[i]) << i;
}

// A body of one node `op`(inputs) whose output `out` is the body's output.
Body OneNode(const std::string& op, std::vector<std::string> inputs, const std::string& out) {
  Body b;
  b.Output(out, kF32, {2});
  b.Node(op, std::move(inputs), {out});
  return b;
}

// Inputs c (bool) and x [2], initializer w [2] = {10, 20}, and y = If(c) with these branches.
std::string IfModel(const Body& then_b, const Body& else_b, const std::string& name = "") {
  ModelBuilder m(13);
  m.Input("c", kBool, {}).Input("x", kF32, {2}).Output("y", kF32, {2});
  m.FloatInit("w", {2}, {10.f, 20.f});
  auto& n = m.Node("If", {"c"}, {"y"}, name);
  GraphAttr(n, "then_branch", then_b);
  GraphAttr(n, "else_branch", else_b);
  return m.Bytes();
}

// y = c ? x + w : x * x; both branches read x (a graph input) and `then` reads w (an
// initializer) from the enclosing graph.
std::string IfModel() {
  return IfModel(OneNode("Add", {"x", "w"}, "t"), OneNode("Mul", {"x", "x"}, "e"));
}

TEST(ControlFlowTest, IfBranchesReadOuterValues) {
  for (bool c : {true, false}) {
    Both b = RunBoth(IfModel(), {{"c", Bool(c)}, {"x", Floats({2.f, 3.f}, {2})}});
    ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
    ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
    const std::vector<float> want =
        c ? std::vector<float>{12.f, 23.f} : std::vector<float>{4.f, 9.f};
    ExpectFloats(b.ref[0].tensor, want, {2});
    ExpectFloats(b.fast[0].tensor, want, {2});
    EXPECT_NE(b.plan.find("cpu.if.subplan"), std::string::npos) << b.plan;
  }
}

// Loop M times: s <- s + x (x from the enclosing graph); scan output: s after each iteration.
// With `nested`, the body instead adds x while i < 2 and subtracts it after, through an If whose
// branches read x two levels up.
std::string LoopModel(bool nested) {
  ModelBuilder m(13);
  m.Input("m", kI64, {}).Input("s0", kF32, {2}).Input("x", kF32, {2});
  m.Output("s", kF32, {2}).Output("trace", kF32, {-1, 2});
  Body body;
  body.Input("i", kI64, {}).Input("cin", kBool, {}).Input("s_in", kF32, {2});
  body.Output("cout", kBool, {}).Output("s_out", kF32, {2}).Output("scan", kF32, {2});
  body.Node("Identity", {"cin"}, {"cout"});
  if (nested) {
    body.Int64Init("two", {}, {2});
    body.Node("Less", {"i", "two"}, {"early"});
    auto& n = body.Node("If", {"early"}, {"s_out"});
    GraphAttr(n, "then_branch", OneNode("Add", {"s_in", "x"}, "a"));
    GraphAttr(n, "else_branch", OneNode("Sub", {"s_in", "x"}, "d"));
  } else {
    body.Node("Add", {"s_in", "x"}, {"s_out"});
  }
  body.Node("Identity", {"s_out"}, {"scan"});
  auto& k = m.Node("Constant", {}, {"true"});
  auto* a = k.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::BOOL);
  a->mutable_t()->add_int32_data(1);
  auto& n = m.Node("Loop", {"m", "true", "s0"}, {"s", "trace"});
  GraphAttr(n, "body", body);
  return m.Bytes();
}

TEST(ControlFlowTest, LoopCarriesStateAndStacksScanOutputs) {
  Both b = RunBoth(
      LoopModel(false),
      {{"m", Scalar64(3)}, {"s0", Floats({1.f, 2.f}, {2})}, {"x", Floats({0.5f, -1.f}, {2})}});
  ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
  ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
  for (const auto* out : {&b.ref, &b.fast}) {
    ExpectFloats((*out)[0].tensor, {2.5f, -1.f}, {2});
    ExpectFloats((*out)[1].tensor, {1.5f, 1.f, 2.f, 0.f, 2.5f, -1.f}, {3, 2});
  }
  EXPECT_NE(b.plan.find("cpu.loop.subplan"), std::string::npos) << b.plan;
}

TEST(ControlFlowTest, LoopWithZeroIterationsGivesEmptyScanOutput) {
  Both b = RunBoth(
      LoopModel(false),
      {{"m", Scalar64(0)}, {"s0", Floats({1.f, 2.f}, {2})}, {"x", Floats({0.5f, -1.f}, {2})}});
  ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
  ExpectFloats(b.fast[0].tensor, {1.f, 2.f}, {2});
  EXPECT_EQ(b.fast[1].tensor.shape(), (Shape{0, 2}));
}

TEST(ControlFlowTest, IfNestedInLoopReadsValuesTwoLevelsUp) {
  Both b = RunBoth(
      LoopModel(true),
      {{"m", Scalar64(5)}, {"s0", Floats({1.f, 2.f}, {2})}, {"x", Floats({0.5f, -1.f}, {2})}});
  ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
  ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
  // +x, +x, -x, -x, -x
  for (const auto* out : {&b.ref, &b.fast}) {
    ExpectFloats((*out)[0].tensor, {0.5f, 3.f}, {2});
    ExpectFloats((*out)[1].tensor, {1.5f, 1.f, 2.f, 0.f, 1.5f, 1.f, 1.f, 2.f, 0.5f, 3.f}, {5, 2});
  }
}

// Also at opset 21, newer than ONNX's checker here knows: kiln's own check of required inputs
// lets the optional M be empty there too.
TEST(ControlFlowTest, LoopWithoutEndStopsAtTheIterationLimit) {
  for (int opset : {0, 21}) {
    // No trip count reaches the body (M omitted), and the body passes cond through: endless.
    std::string bytes = LoopModel(false);
    onnx::ModelProto mp;
    ASSERT_TRUE(mp.ParseFromString(bytes));
    if (opset != 0) mp.mutable_opset_import(0)->set_version(opset);
    for (auto& n : *mp.mutable_graph()->mutable_node())
      if (n.op_type() == "Loop") n.set_input(0, "");
    setenv("KILN_LOOP_MAX_ITERATIONS", "1000", 1);
    Both b = RunBoth(
        mp.SerializeAsString(),
        {{"m", Scalar64(3)}, {"s0", Floats({1.f, 2.f}, {2})}, {"x", Floats({0.5f, -1.f}, {2})}});
    unsetenv("KILN_LOOP_MAX_ITERATIONS");
    for (const Status* s : {&b.ref_status, &b.fast_status}) {
      EXPECT_EQ(s->code(), StatusCode::kInvalidArgument) << opset << ": " << s->ToString();
      EXPECT_NE(s->message().find("stopped after 1000 iterations"), std::string::npos)
          << s->ToString();
      EXPECT_NE(s->message().find("no trip count"), std::string::npos) << s->ToString();
    }
  }
}

TEST(ControlFlowTest, MalformedTripCountIsAClearError) {
  std::string bytes = LoopModel(false);
  onnx::ModelProto mp;
  ASSERT_TRUE(mp.ParseFromString(bytes));
  mp.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  Both b = RunBoth(mp.SerializeAsString(), {{"m", Floats({3.f}, {})},
                                            {"s0", Floats({1.f, 2.f}, {2})},
                                            {"x", Floats({0.5f, -1.f}, {2})}});
  for (const Status* s : {&b.ref_status, &b.fast_status}) {
    EXPECT_FALSE(s->ok());
    EXPECT_NE(s->message().find("trip count M must be one int64 element; got float32[]"),
              std::string::npos)
        << s->ToString();
  }
}

TEST(ControlFlowTest, BodyWithUnsupportedNodeIsListedAtLoad) {
  auto s = Session::LoadFromBytes(
      IfModel(OneNode("NoSuchOp", {"x"}, "t"), OneNode("Neg", {"x"}, "e"), "the_if"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported) << s.status().ToString();
  EXPECT_NE(s.status().message().find("'the_if' If"), std::string::npos) << s.status().ToString();
  EXPECT_NE(s.status().message().find("`then_branch` of If node 'the_if'"), std::string::npos)
      << s.status().ToString();
  EXPECT_NE(s.status().message().find("NoSuchOp"), std::string::npos) << s.status().ToString();
}

TEST(ControlFlowTest, BodyReadingAnUndefinedNameIsInvalidModel) {
  auto s =
      Session::LoadFromBytes(IfModel(OneNode("Neg", {"nowhere"}, "t"), OneNode("Neg", {"x"}, "e")));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().ToString();
  EXPECT_NE(s.status().message().find("nowhere"), std::string::npos) << s.status().ToString();
}

TEST(ControlFlowTest, BranchOutputCountMustMatchTheNode) {
  Body two_outputs = OneNode("Neg", {"x"}, "t");
  two_outputs.Output("t2", kF32, {2});
  two_outputs.Node("Neg", {"x"}, {"t2"});
  auto s = Session::LoadFromBytes(IfModel(two_outputs, OneNode("Neg", {"x"}, "e")));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("`then_branch` has 2 outputs, the node 1"), std::string::npos)
      << s.status().ToString();
}

// Ifs nested 17 deep (a hostile file could nest thousands): refused at load, not a stack overflow.
TEST(ControlFlowTest, SubgraphsNestedTooDeepAreRefused) {
  for (int depth : {16, 17}) {
    Body inner = OneNode("Neg", {"x"}, "t0");
    for (int level = 1; level < depth; ++level) {
      Body b;
      const std::string out = "t" + std::to_string(level);
      b.Output(out, kF32, {2});
      auto& n = b.Node("If", {"c"}, {out});
      GraphAttr(n, "then_branch", inner);
      GraphAttr(n, "else_branch", OneNode("Relu", {"x"}, "e" + std::to_string(level)));
      inner = b;
    }
    auto s = Session::LoadFromBytes(IfModel(inner, OneNode("Abs", {"x"}, "a")));
    if (depth == 16) {
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      continue;
    }
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().ToString();
    EXPECT_NE(s.status().message().find("subgraphs nest deeper than 16 levels"), std::string::npos)
        << s.status().ToString();
  }
}

// Scan-9: running sum over the rows of x (forward) and of its reversed rows (direction 1).
TEST(ControlFlowTest, ScanSumsForwardAndReverse) {
  for (int direction : {0, 1}) {
    ModelBuilder m(11);
    m.Input("init", kF32, {2}).Input("x", kF32, {3, 2});
    m.Output("sum", kF32, {2}).Output("partial", kF32, {3, 2});
    Body body;
    body.Input("acc", kF32, {2}).Input("row", kF32, {2});
    body.Output("acc_out", kF32, {2}).Output("scan_out", kF32, {2});
    body.Node("Add", {"acc", "row"}, {"acc_out"});
    body.Node("Identity", {"acc_out"}, {"scan_out"});
    auto& n = m.Node("Scan", {"init", "x"}, {"sum", "partial"});
    GraphAttr(n, "body", body);
    ModelBuilder::IntAttr(n, "num_scan_inputs", 1);
    auto* dirs = n.add_attribute();
    dirs->set_name("scan_input_directions");
    dirs->set_type(onnx::AttributeProto::INTS);
    dirs->add_ints(direction);
    Both b = RunBoth(m.Bytes(), {{"init", Floats({0.f, 0.f}, {2})},
                                 {"x", Floats({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2})}});
    ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
    ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
    const std::vector<float> partial = direction == 0 ? std::vector<float>{1, 2, 4, 6, 9, 12}
                                                      : std::vector<float>{5, 6, 8, 10, 9, 12};
    for (const auto* out : {&b.ref, &b.fast}) {
      ExpectFloats((*out)[0].tensor, {9.f, 12.f}, {2});
      ExpectFloats((*out)[1].tensor, partial, {3, 2});
    }
    EXPECT_NE(b.plan.find("cpu.scan.subplan"), std::string::npos) << b.plan;
  }
}

// Scan-8: a batch axis first, sequence_lens, `directions`. Running sums of x's rows per sample,
// reversed; sample 1 runs one step, so its scan output is zero after it. The expected values are
// ONNX Runtime's for the same model (its Scan-8 kernel pads with zeros too): the scan8_ort test
// (tests/runtime/scan8_ort_check.py) runs ONNX Runtime and kiln on it and checks these numbers.
std::string Scan8Model() {
  ModelBuilder m(8);
  m.Input("lens", kI64, {-1}).Input("init", kF32, {-1, 2}).Input("x", kF32, {-1, -1, 2});
  m.Output("sum", kF32, {-1, 2}).Output("partial", kF32, {-1, -1, 2});
  Body body;
  body.Input("acc", kF32, {2}).Input("row", kF32, {2});
  body.Output("acc_out", kF32, {2}).Output("scan_out", kF32, {2});
  body.Node("Add", {"acc", "row"}, {"acc_out"});
  body.Node("Identity", {"acc_out"}, {"scan_out"});
  auto& n = m.Node("Scan", {"lens", "init", "x"}, {"sum", "partial"});
  GraphAttr(n, "body", body);
  ModelBuilder::IntAttr(n, "num_scan_inputs", 1);
  ModelBuilder::IntsAttr(n, "directions", {1});
  return m.Bytes();
}

TEST(ControlFlowTest, Scan8ScansEachSampleForItsSequenceLength) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Both b = RunBoth(Scan8Model(), {{"lens", Tensor::FromVector<int64_t>({3, 1}, {2})},
                                  {"init", Floats({0, 0, 100, 100}, {2, 2})},
                                  {"x", Floats(x, {2, 3, 2})}});
  ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
  ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
  for (const auto* out : {&b.ref, &b.fast}) {
    ExpectFloats((*out)[0].tensor, {9, 12, 107, 108}, {2, 2});
    ExpectFloats((*out)[1].tensor, {5, 6, 8, 10, 9, 12, 107, 108, 0, 0, 0, 0}, {2, 3, 2});
  }
  EXPECT_NE(b.plan.find("cpu.scan.subplan"), std::string::npos) << b.plan;
}

TEST(ControlFlowTest, Scan8RefusesBadSequenceLengthsAndBatches) {
  const std::vector<float> x(12, 1.f);
  struct Case {
    Tensor lens, init;
    std::string want;
  };
  std::vector<Case> cases;
  cases.push_back({Tensor::FromVector<int64_t>({3, 4}, {2}), Floats({0, 0, 0, 0}, {2, 2}),
                   "sequence_lens[1] is 4; it must be in [0, 3]"});
  cases.push_back({Tensor::FromVector<int64_t>({-1, 0}, {2}), Floats({0, 0, 0, 0}, {2, 2}),
                   "sequence_lens[0] is -1"});
  cases.push_back({Tensor::FromVector<int64_t>({1, 1, 1}, {3}), Floats({0, 0, 0, 0}, {2, 2}),
                   "sequence_lens must be int64[2]; got int64[3]"});
  cases.push_back({Tensor::FromVector<int64_t>({1, 1, 1}, {3}), Floats({0, 0, 0, 0, 0, 0}, {3, 2}),
                   "scan input 0 has batch 2, the inputs before 3"});
  for (const Case& c : cases) {
    Both b =
        RunBoth(Scan8Model(), {{"lens", c.lens}, {"init", c.init}, {"x", Floats(x, {2, 3, 2})}});
    for (const Status* st : {&b.ref_status, &b.fast_status}) {
      EXPECT_FALSE(st->ok()) << c.want;
      EXPECT_NE(st->message().find(c.want), std::string::npos) << st->ToString();
      EXPECT_NE(st->message().find("Scan"), std::string::npos) << st->ToString();
    }
  }
}

// y = If(Gather(Shape(x), 0) == 1) then Neg(x) else Relu(x), as exporters write shape checks.
std::string ShapeCheckIfModel() {
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 2}).Output("y", kF32, {-1, 2});
  m.Int64Init("zero", {}, {0});
  m.Int64Init("one", {}, {1});
  m.Node("Shape", {"x"}, {"s"});
  m.Node("Gather", {"s", "zero"}, {"n"});
  m.Node("Equal", {"n", "one"}, {"single"});
  auto& n = m.Node("If", {"single"}, {"y"}, "check");
  GraphAttr(n, "then_branch", OneNode("Neg", {"x"}, "t"));
  GraphAttr(n, "else_branch", OneNode("Relu", {"x"}, "e"));
  return m.Bytes();
}

TEST(ControlFlowTest, IfsDecidedByInputShapesAreInlined) {
  for (int64_t rows : {1, 3}) {
    auto g = onnxio::LoadModelFromBytes(ShapeCheckIfModel(), "");
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    auto inlined = passes::InlineStaticIfs(**g, {Shape{rows, 2}});
    ASSERT_TRUE(inlined.ok()) << inlined.status().ToString();
    EXPECT_EQ(*inlined, 1);
    std::string ops;
    for (const auto& node : (*g)->nodes) ops += node.op_type + " ";
    EXPECT_EQ(ops.find("If"), std::string::npos) << ops;
    EXPECT_NE(ops.find(rows == 1 ? "Neg" : "Relu"), std::string::npos) << ops;
    EXPECT_EQ(ops.find(rows == 1 ? "Relu" : "Neg"), std::string::npos) << ops;
  }
  // A shape the condition cannot be read from (x's rank unknown to the caller: no shapes) keeps
  // the If.
  auto g = onnxio::LoadModelFromBytes(ShapeCheckIfModel(), "");
  ASSERT_TRUE(g.ok());
  auto inlined = passes::InlineStaticIfs(**g, {});
  ASSERT_TRUE(inlined.ok());
  EXPECT_EQ(*inlined, 0);
}

// The same check inside an If branch: the branch is planned per shape with the inner If inlined,
// and the results are those of the interpreted branch for both shapes.
TEST(ControlFlowTest, ShapeCheckInsideABodyGivesTheInterpretedResults) {
  for (int64_t rows : {1, 3}) {
    ModelBuilder m(13);
    m.Input("x", kF32, {-1, 2}).Input("c", kBool, {}).Output("y", kF32, {-1, 2});
    m.Int64Init("zero", {}, {0});
    m.Int64Init("one", {}, {1});
    Body checked;
    checked.Output("r", kF32, {-1, 2});
    checked.Node("Shape", {"x"}, {"s"});
    checked.Node("Gather", {"s", "zero"}, {"n"});
    checked.Node("Equal", {"n", "one"}, {"single"});
    auto& in_if = checked.Node("If", {"single"}, {"r"});
    GraphAttr(in_if, "then_branch", OneNode("Neg", {"x"}, "t"));
    GraphAttr(in_if, "else_branch", OneNode("Relu", {"x"}, "e"));
    auto& n = m.Node("If", {"c"}, {"y"});
    GraphAttr(n, "then_branch", checked);
    GraphAttr(n, "else_branch", OneNode("Abs", {"x"}, "a"));
    std::vector<float> xv;
    for (int64_t i = 0; i < rows * 2; ++i) xv.push_back(i % 2 ? 1.5f : -2.f);
    Both b = RunBoth(m.Bytes(), {{"x", Floats(xv, {rows, 2})}, {"c", Bool(true)}});
    ASSERT_TRUE(b.ref_status.ok()) << b.ref_status.ToString();
    ASSERT_TRUE(b.fast_status.ok()) << b.fast_status.ToString();
    std::vector<float> want;
    for (float v : xv) want.push_back(rows == 1 ? -v : std::max(v, 0.f));
    ExpectFloats(b.ref[0].tensor, want, {rows, 2});
    ExpectFloats(b.fast[0].tensor, want, {rows, 2});
  }
}

}  // namespace
}  // namespace kiln
