// Session behaviour: input validation messages, the all-at-once unsupported-node report, shape
// sub-graph folding at prepare time, plan reuse per shape signature, concurrent runs.
#include "kiln/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "core/half.h"
#include "model_builder.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

std::unique_ptr<Session> MustLoad(const std::string& bytes) {
  auto s = Session::LoadFromBytes(bytes);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

Tensor Iota(Shape shape, float scale = 1.f) {
  Tensor t = Tensor::Empty(DataType::kFloat, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * static_cast<float>(i);
  return t;
}

// y = relu(x + b), x: [N,3], b: [3].
std::string AddReluModel() {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 3}).Output("y", kF32, {-1, 3});
  m.FloatInit("b", {3}, {1.f, -10.f, 0.5f});
  m.Node("Add", {"x", "b"}, {"s"});
  m.Node("Relu", {"s"}, {"y"});
  return m.Bytes();
}

TEST(SessionTest, RunsAndReportsSpecs) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->inputs().size(), 1u);
  EXPECT_EQ(s->inputs()[0].ToString(), "float32[N,3]");
  std::vector<NamedTensor> out;
  ASSERT_TRUE(s->Run({{"x", Iota({2, 3})}}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "y");
  EXPECT_EQ(out[0].tensor.shape(), (Shape{2, 3}));
  const float want[] = {1.f, 0.f, 2.5f, 4.f, 0.f, 5.5f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[i], want[i]) << i;
}

// Shapes that the model's open dimensions allow one by one but not together (an Add of [2,3] and
// [4,3] where the model declares [N,3] and [M,3]) are the caller's error: InvalidArgument naming
// the shapes given and the node, not InvalidModel.
TEST(SessionTest, InputShapesThatDoNotFitTogetherAreTheCallersError) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 3}).Input("y", kF32, {-1, 3}).Output("z", kF32, {-1, 3});
  m.InputDimParam(1, 0, "M");
  m.Node("Add", {"x", "y"}, {"z"}, "sum");
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto feed = [](int64_t a, int64_t b) {
    return std::vector<NamedTensor>{{"x", Tensor::Empty(DataType::kFloat, {a, 3})},
                                    {"y", Tensor::Empty(DataType::kFloat, {b, 3})}};
  };
  std::vector<NamedTensor> out;
  const Status st = (*s)->Run(feed(2, 4), &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("x [2,3], y [4,3]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'sum'"), std::string::npos) << st.message();
  EXPECT_EQ((*s)->Prepare({{"x", {2, 3}}, {"y", {4, 3}}}).code(), StatusCode::kInvalidArgument);
  // Shapes that fit still run, broadcasting included.
  EXPECT_TRUE((*s)->Run(feed(4, 4), &out).ok());
  EXPECT_TRUE((*s)->Run(feed(4, 1), &out).ok());
}

// An empty tensor can name any dims ([0, 2^62, 115] holds nothing), and kernels multiplying the
// dims around an axis overflowed on them: the session fuzzer found ArgMin, MatMul and Concat
// (tests/fuzz/corpus/regress_*_empty_huge_dims.onnx). kiln refuses a shape whose dims, zeros
// counted as 1, multiply past 2^48 (core/shape_span.h): fed, it is InvalidArgument; below the
// bound, ops on empty inputs with large dims do nothing.
TEST(SessionTest, EmptyInputsWithHugeDimsAreRefusedAndLargeOnesDoNothing) {
  for (const char* op : {"ArgMin", "Softmax", "TopK", "Concat"}) {
    ModelBuilder m;
    m.Input("x", kF32, {-1, -1, -1});
    if (std::string(op) == "TopK") {
      m.Int64Init("k", {1}, {0});
      m.Output("y", kF32, {}).OutputAnyShape("i", onnx::TensorProto::INT64);
      ModelBuilder::IntAttr(m.Node(op, {"x", "k"}, {"y", "i"}), "axis", 0);
    } else if (std::string(op) == "Concat") {
      m.Output("y", kF32, {});
      ModelBuilder::IntAttr(m.Node(op, {"x", "x"}, {"y"}), "axis", 2);
    } else {
      m.Output("y", std::string(op) == "ArgMin" ? onnx::TensorProto::INT64 : kF32, {});
      ModelBuilder::IntAttr(m.Node(op, {"x"}, {"y"}), "axis", 2);
    }
    auto* out = m.proto().mutable_graph()->mutable_output(0);
    out->mutable_type()->mutable_tensor_type()->clear_shape();
    auto s = Session::LoadFromBytes(m.Bytes());
    ASSERT_TRUE(s.ok()) << op << ": " << s.status().ToString();
    std::vector<NamedTensor> y;
    const Status refused =
        (*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {0, int64_t{1} << 62, 115})}}, &y);
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << op << ": " << refused.ToString();
    EXPECT_NE(refused.message().find("multiply past 2^48"), std::string::npos) << refused.message();
    const Status st =
        (*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {0, int64_t{1} << 40, 115})}}, &y);
    ASSERT_TRUE(st.ok()) << op << ": " << st.ToString();
    ASSERT_FALSE(y.empty());
    EXPECT_EQ(y[0].tensor.numel(), 0) << op;
  }
  // MatMul likewise: its reference kernel's broadcast strides of such an input overflowed
  // (regress_matmul_empty_huge_dims.onnx).
  ModelBuilder m;
  m.Input("a", kF32, {-1, -1, 2}).OutputAnyShape("y", kF32);
  m.FloatInit("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  m.Node("MatMul", {"a", "w"}, {"y"});
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<NamedTensor> y;
  EXPECT_EQ(
      (*s)->Run({{"a", Tensor::Empty(DataType::kFloat, {0, int64_t{1} << 62, 2})}}, &y).code(),
      StatusCode::kInvalidArgument);
  const Status st =
      (*s)->Run({{"a", Tensor::Empty(DataType::kFloat, {0, int64_t{1} << 40, 2})}}, &y);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(y[0].tensor.shape(), (Shape{0, int64_t{1} << 40, 3}));
}

// The same bound where a shape is not fed: an initializer's dims (the loader) and a shape a node
// would make (the evaluator, here ConstantOfShape asked for [0, 2^30, 2^30]) are refused as
// InvalidModel, naming the tensor or the node: the first at load, the second when planned.
TEST(SessionTest, ModelShapesWithHugeDimsAreRefused) {
  {
    ModelBuilder m;
    m.Input("x", kF32, {2}).Output("y", kF32, {});
    m.FloatInit("w", {0, int64_t{1} << 31, int64_t{1} << 31}, {});
    ModelBuilder::IntAttr(m.Node("Concat", {"w", "w"}, {"y"}), "axis", -1);
    auto s = Session::LoadFromBytes(m.Bytes());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().ToString();
    EXPECT_NE(s.status().message().find("implausibly large"), std::string::npos)
        << s.status().message();
  }
  {
    ModelBuilder m;
    m.Input("x", kF32, {2}).Output("y", kF32, {});
    m.Int64Init("shape", {3}, {0, int64_t{1} << 30, int64_t{1} << 30});
    m.Node("ConstantOfShape", {"shape"}, {"c"}, "make");
    m.Node("Add", {"c", "x"}, {"y"});
    auto s = Session::LoadFromBytes(m.Bytes());
    ASSERT_TRUE(s.ok()) << s.status().ToString();  // planned at the first run
    std::vector<NamedTensor> y;
    const Status st = (*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {2})}}, &y);
    EXPECT_EQ(st.code(), StatusCode::kInvalidModel) << st.ToString();
    EXPECT_NE(st.message().find("'make'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("multiply past 2^48"), std::string::npos) << st.message();
  }
}

// Reshape, Unsqueeze, Squeeze, Flatten and Identity only relabel the shape: their output shares
// the input's arena buffer when nothing reads the input later, and is a copy when something does.
TEST(SessionTest, ShapeOnlyOpsShareTheirInputsBuffer) {
  for (bool input_read_later : {false, true}) {
    ModelBuilder m(13);
    m.Input("x", kF32, {4, 256}).Output("y", kF32, {});
    m.Int64Init("s", {2}, {16, 64});
    m.Int64Init("ax", {1}, {0});
    m.Node("Relu", {"x"}, {"r"});
    m.Node("Reshape", {"r", "s"}, {"a"});
    m.Node("Unsqueeze", {"a", "ax"}, {"b"});
    m.Node("Squeeze", {"b", "ax"}, {"c"});
    m.Node("Flatten", {"c"}, {"d"});
    m.Node("Identity", {"d"}, {"e"});
    if (input_read_later) {
      m.Node("Reshape", {"e", "s"}, {"f"});
      m.Node("Add", {"f", "a"}, {"y"});  // a is read after the Unsqueeze
    } else {
      m.Node("Relu", {"e"}, {"y"});
    }
    SessionOptions o;
    o.optimize = false;
    auto s = Session::LoadFromBytes(m.Bytes(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const Tensor x = Iota({4, 256}, -0.5f);
    auto p = (*s)->DescribePlanSummary({{"x", x}});
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    // One 4 KB buffer for every value, or two when `a` stays alive beside its relabelled copies.
    EXPECT_EQ(p->arena_bytes - p->scratch_bytes, input_read_later ? 8192u : 4096u) << p->text;
    if (!input_read_later) {
      // y is the graph output: written where the run returns it, not in place.
      EXPECT_NE(p->text.find("5 outputs written in place"), std::string::npos) << p->text;
    }
    std::vector<NamedTensor> out;
    ASSERT_TRUE((*s)->Run({{"x", x}}, &out).ok());
    for (int64_t i = 0; i < 1024; ++i) {
      const float r = std::max(0.f, x.data<float>()[i]);
      ASSERT_EQ(out[0].tensor.data<float>()[i], input_read_later ? 2 * r : r) << i;
    }
  }
}

TEST(SessionTest, ReportsTheModelsMetadata) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 3}).Output("y", kF32, {-1, 3});
  m.Node("Relu", {"x"}, {"y"});
  onnx::ModelProto& p = m.proto();
  p.set_producer_name("pytorch");
  p.set_producer_version("2.1.0");
  p.set_domain("ai.kiln.test");
  p.set_model_version(7);
  p.set_doc_string("a relu");
  p.mutable_graph()->set_doc_string("the graph");
  for (const auto& [k, v] :
       {std::pair<std::string, std::string>{"classes", "cat,dog"}, {"mean", "0.5"}}) {
    auto* e = p.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  const ModelMetadata& md = s->metadata();
  EXPECT_EQ(md.producer_name, "pytorch");
  EXPECT_EQ(md.producer_version, "2.1.0");
  EXPECT_EQ(md.domain, "ai.kiln.test");
  EXPECT_EQ(md.model_version, 7);
  EXPECT_EQ(md.doc_string, "a relu");
  EXPECT_EQ(md.graph_name, "test");
  EXPECT_EQ(md.graph_doc_string, "the graph");
  EXPECT_EQ(md.ir_version, 8);
  ASSERT_EQ(md.custom.size(), 2u);
  EXPECT_EQ(md.custom[0], (std::pair<std::string, std::string>{"classes", "cat,dog"}));
  EXPECT_EQ(md.custom[1], (std::pair<std::string, std::string>{"mean", "0.5"}));
  ASSERT_FALSE(md.opset_imports.empty());
  EXPECT_EQ(md.opset_imports[0].first, "");
}

TEST(SessionTest, RunIntoWritesTheCallersBuffers) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  float storage[6 + 2];
  storage[6] = storage[7] = -1234.f;  // past the end: must stay
  std::vector<NamedTensor> outs = {{"y", Tensor::View(DataType::kFloat, {2, 3}, storage)}};
  for (int round = 0; round < 2; ++round) {  // planned, then warm
    ASSERT_TRUE(s->RunInto({{"x", Iota({2, 3})}}, &outs).ok());
    const float want[] = {1.f, 0.f, 2.5f, 4.f, 0.f, 5.5f};
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(storage[i], want[i]) << i;
    EXPECT_EQ(storage[6], -1234.f);
    EXPECT_EQ(storage[7], -1234.f);
  }
  // Another batch size: the binding must match the new shape.
  Status st = s->RunInto({{"x", Iota({3, 3})}}, &outs);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("this run computes [3,3]"), std::string::npos) << st.message();
}

// Graph outputs are written by their steps straight into the tensors a run returns (or the
// caller's bound ones), and take no arena space: an output read by later steps, one whose step
// could have written in place over its input's buffer, outputs the caller drops (RunInto
// without them: storage of the run's own), and each run's results in storage of their own (a
// later run leaves them alone).
TEST(SessionTest, GraphOutputsAreWrittenWhereTheyAreReturned) {
  ModelBuilder m(13);
  m.Input("x", kF32, {4, 8}).Output("r", kF32, {}).Output("y", kF32, {}).Output("z", kF32, {});
  m.FloatInit("b", {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  m.Int64Init("s", {2}, {8, 4});
  m.Node("Relu", {"x"}, {"r"});  // an output that later steps read
  m.Node("Add", {"r", "b"}, {"a"});
  m.Node("Relu", {"a"}, {"y"});          // in place over a's buffer
  m.Node("Reshape", {"y", "s"}, {"z"});  // y is read after: a copy
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  auto check = [](const std::vector<NamedTensor>& out, const Tensor& x) {
    ASSERT_EQ(out.size(), 3u);
    for (int64_t i = 0; i < 32; ++i) {
      const float r = std::max(0.f, x.data<float>()[i]);
      const float y = std::max(0.f, r + static_cast<float>(i % 8 + 1));
      ASSERT_EQ(out[0].tensor.data<float>()[i], r) << i;
      ASSERT_EQ(out[1].tensor.data<float>()[i], y) << i;
      ASSERT_EQ(out[2].tensor.data<float>()[i], y) << i;
    }
    EXPECT_EQ(out[2].tensor.shape(), (Shape{8, 4}));
  };
  const Tensor x1 = Iota({4, 8}, -0.5f), x2 = Iota({4, 8}, 0.25f);
  // The arena holds a (128 bytes) alone: the three outputs have no buffer there.
  auto p = s->DescribePlanSummary({{"x", x1}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->arena_bytes - p->scratch_bytes, 128u) << p->text;
  std::vector<NamedTensor> first, second;
  ASSERT_TRUE(s->Run({{"x", x1}}, &first).ok());
  ASSERT_TRUE(s->Run({{"x", x2}}, &second).ok());
  check(first, x1);
  check(second, x2);
  for (size_t k = 0; k < 3; ++k) EXPECT_NE(first[k].tensor.raw(), second[k].tensor.raw()) << k;
  // Bound: y only (r and z dropped), then all three.
  float y_storage[32];
  std::vector<NamedTensor> bound = {{"y", Tensor::View(DataType::kFloat, {4, 8}, y_storage)}};
  ASSERT_TRUE(s->RunInto({{"x", x1}}, &bound).ok());
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(y_storage[i], first[1].tensor.data<float>()[i]) << i;
  std::vector<NamedTensor> all = {{"r", Tensor::Empty(DataType::kFloat, {4, 8})},
                                  {"y", Tensor::Empty(DataType::kFloat, {4, 8})},
                                  {"z", Tensor::Empty(DataType::kFloat, {8, 4})}};
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(s->RunInto({{"x", round == 0 ? x2 : x1}}, &all).ok());
    check(all, round == 0 ? x2 : x1);
  }
  check(first, x1);  // still each run's values
  check(second, x2);
}

TEST(SessionTest, KeepsAtMostMaxPlansLeastRecentlyUsedFirst) {
  SessionOptions o;
  o.max_plans = 2;
  auto s = Session::LoadFromBytes(AddReluModel(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto run = [&](int64_t n) {
    std::vector<NamedTensor> out;
    Status st = (*s)->Run({{"x", Iota({n, 3})}}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(out[0].tensor.shape(), (Shape{n, 3}));
    EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[3 * n - 1], 3.f * n - 1 + 0.5f);
  };
  run(1);
  run(2);
  run(1);  // 1 is now more recent than 2
  EXPECT_EQ((*s)->stats().plans, 2u);
  EXPECT_EQ((*s)->stats().plans_evicted, 0u);
  run(3);  // evicts 2
  EXPECT_EQ((*s)->stats().plans, 2u);
  EXPECT_EQ((*s)->stats().plans_evicted, 1u);
  run(1);  // still kept
  EXPECT_EQ((*s)->stats().plans_evicted, 1u);
  run(2);  // planned again, evicting 3
  EXPECT_EQ((*s)->stats().plans, 2u);
  EXPECT_EQ((*s)->stats().plans_evicted, 2u);
}

TEST(SessionTest, PreparePlansAheadOfTheFirstRun) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->Prepare({{"x", {4, 3}}}).ok());
  ASSERT_TRUE(s->Prepare({{"x", {8, 3}}}).ok());
  EXPECT_EQ(s->stats().plans, 2u);
  EXPECT_GE(s->stats().arenas, 1u);  // the arena is made by Prepare
  std::vector<NamedTensor> out;
  ASSERT_TRUE(s->Run({{"x", Iota({4, 3})}}, &out).ok());
  EXPECT_EQ(s->stats().plans, 2u);  // the prepared plan ran
  EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[0], 1.f);
  Status st = s->Prepare({{"y", {4, 3}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("unknown input 'y'"), std::string::npos) << st.message();
  st = s->Prepare({});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("symbolic dimension"), std::string::npos) << st.message();
  st = s->Prepare({{"x", {4, 5}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("dimension 1 must be 3"), std::string::npos) << st.message();
}

// float16 / bfloat16 models (computed in float32 inside: passes/lower_float16.cc).
Tensor HalfTensor(const Shape& shape, const std::vector<double>& values, bool bf16 = false) {
  Tensor t = Tensor::Empty(bf16 ? DataType::kBFloat16 : DataType::kFloat16, shape);
  auto* bits = static_cast<uint16_t*>(t.raw());
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = bf16 ? FloatToBf16(static_cast<float>(values[i])) : DoubleToHalf(values[i]);
  return t;
}
void HalfInit(ModelBuilder& m, const std::string& name, const std::vector<double>& values,
              bool bf16 = false) {
  onnx::TensorProto& t = *m.proto().mutable_graph()->add_initializer();
  t.set_name(name);
  t.set_data_type(bf16 ? onnx::TensorProto::BFLOAT16 : onnx::TensorProto::FLOAT16);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (double v : values)
    t.add_int32_data(bf16 ? FloatToBf16(static_cast<float>(v)) : DoubleToHalf(v));
}

TEST(SessionTest, RunsFloat16AndBfloat16ModelsInFloat32) {
  for (bool bf16 : {false, true}) {
    const int type = bf16 ? onnx::TensorProto::BFLOAT16 : onnx::TensorProto::FLOAT16;
    ModelBuilder m;
    m.Input("x", type, {2, 3}).Output("y", type, {2, 3});
    HalfInit(m, "b", {1.0, -10.0, 0.5}, bf16);
    m.Node("Add", {"x", "b"}, {"s"});
    m.Node("Relu", {"s"}, {"y"});
    auto s = MustLoad(m.Bytes());
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->inputs()[0].dtype, bf16 ? DataType::kBFloat16 : DataType::kFloat16);
    EXPECT_EQ(s->outputs()[0].dtype, bf16 ? DataType::kBFloat16 : DataType::kFloat16);
    std::vector<NamedTensor> out;
    Status st = s->Run({{"x", HalfTensor({2, 3}, {0, 1, 2, 3, 4, 5}, bf16)}}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(out[0].tensor.dtype(), bf16 ? DataType::kBFloat16 : DataType::kFloat16);
    const auto* y = static_cast<const uint16_t*>(out[0].tensor.raw());
    const float want[] = {1.f, 0.f, 2.5f, 4.f, 0.f, 5.5f};
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(bf16 ? Bf16ToFloat(y[i]) : HalfToFloat(y[i]), want[i]) << i;
    EXPECT_NE(s->optimization_log()[0].find("lower_float16"), std::string::npos);
  }
}

TEST(SessionTest, RunsKeepIoTypesFloat16Models) {
  // float32 in and out around a float16 body, as onnxconverter-common's keep_io_types writes it;
  // the bias is a float16 Constant node.
  ModelBuilder m;
  m.Input("x", kF32, {2, 3}).Output("y", kF32, {2, 3});
  ModelBuilder::IntAttr(m.Node("Cast", {"x"}, {"xh"}), "to", onnx::TensorProto::FLOAT16);
  auto& c = m.Node("Constant", {}, {"b"});
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT16);
  a->mutable_t()->add_dims(3);
  for (double v : {1.0, -10.0, 0.5}) a->mutable_t()->add_int32_data(DoubleToHalf(v));
  m.Node("Add", {"xh", "b"}, {"s"});
  m.Node("Relu", {"s"}, {"r"});
  ModelBuilder::IntAttr(m.Node("Cast", {"r"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  std::vector<NamedTensor> out;
  Status st = s->Run({{"x", Iota({2, 3})}}, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const float want[] = {1.f, 0.f, 2.5f, 4.f, 0.f, 5.5f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[i], want[i]) << i;
}

// The opset-18+ attributes and inputs refuse bad values with the rule that was broken.
TEST(SessionTest, NewerOpsetFormsRefuseBadValues) {
  auto expect = [](const std::string& bytes, const std::string& text) {
    auto s = Session::LoadFromBytes(bytes);
    Status st = s.ok() ? Status(OkStatus()) : s.status();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      st = (*s)->Run({{"x", Iota({4, 3})}}, &out);
    }
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find(text), std::string::npos) << st.message();
  };
  {  // Split-18: num_outputs must match the outputs
    ModelBuilder m(18);
    m.Input("x", kF32, {4, 3}).Output("a", kF32, {-1, 3}).Output("b", kF32, {-1, 3});
    ModelBuilder::IntAttr(m.Node("Split", {"x"}, {"a", "b"}), "num_outputs", 3);
    expect(m.Bytes(), "num_outputs (3) must equal the number of outputs (2)");
  }
  {  // Pad-18: axes must be distinct
    ModelBuilder m(18);
    m.Input("x", kF32, {4, 3}).Output("y", kF32, {-1, -1});
    m.Int64Init("pads", {4}, {1, 1, 0, 0});
    m.Int64Init("axes", {2}, {1, -1});
    m.FloatInit("v", {}, {0.f});
    m.Node("Pad", {"x", "pads", "v", "axes"}, {"y"});
    expect(m.Bytes(), "axes must be distinct");
  }
  {  // Pad-18: wrap is a Pad-19 mode
    ModelBuilder m(18);
    m.Input("x", kF32, {4, 3}).Output("y", kF32, {-1, -1});
    m.Int64Init("pads", {4}, {1, 1, 0, 0});
    ModelBuilder::StringAttr(m.Node("Pad", {"x", "pads"}, {"y"}), "mode", "wrap");
    expect(m.Bytes(), "wrap from opset 19");
  }
  {  // Resize-18: an unknown keep_aspect_ratio_policy, and antialias with mode nearest
    for (const auto& [attr, text] :
         {std::pair<std::string, std::string>{"keep_aspect_ratio_policy",
                                              "keep_aspect_ratio_policy must be stretch"},
          {"antialias", "antialias=1 applies to modes linear and cubic; got nearest"}}) {
      ModelBuilder m(18);
      m.Input("x", kF32, {4, 3}).Output("y", kF32, {-1, -1});
      m.FloatInit("scales", {2}, {1.f, 2.f});
      auto& n = m.Node("Resize", {"x", "", "scales"}, {"y"});
      if (attr == "antialias")
        ModelBuilder::IntAttr(n, attr, 1);
      else
        ModelBuilder::StringAttr(n, attr, "bigger");
      expect(m.Bytes(), text);
    }
  }
  {  // Resize-18: axes out of range
    ModelBuilder m(18);
    m.Input("x", kF32, {4, 3}).Output("y", kF32, {-1, -1});
    m.FloatInit("scales", {1}, {2.f});
    ModelBuilder::IntsAttr(m.Node("Resize", {"x", "", "scales"}, {"y"}), "axes", {5});
    expect(m.Bytes(), "axes must be distinct and in [-2, 2)");
  }
  {  // IsInf: detect_negative is a 0/1 flag
    ModelBuilder m(20);
    m.Input("x", kF32, {4, 3}).Output("y", onnx::TensorProto::BOOL, {4, 3});
    ModelBuilder::IntAttr(m.Node("IsInf", {"x"}, {"y"}), "detect_negative", 2);
    expect(m.Bytes(), "detect_negative and detect_positive must be 0 or 1; got 2 and 1");
  }
  {  // Gelu-20: an unknown approximation
    ModelBuilder m(20);
    m.Input("x", kF32, {4, 3}).Output("y", kF32, {4, 3});
    ModelBuilder::StringAttr(m.Node("Gelu", {"x"}, {"y"}), "approximate", "sigmoid");
    expect(m.Bytes(), "approximate must be none or tanh; got 'sigmoid'");
  }
  {  // GroupNormalization: 3 channels do not split into 2 groups; scale per channel at 21
    for (int opset : {18, 21}) {
      ModelBuilder m(opset);
      m.Input("x", kF32, {4, 3}).Output("y", kF32, {4, 3});
      m.FloatInit("s", {2}, {1.f, 1.f});
      m.FloatInit("b", {2}, {0.f, 0.f});
      ModelBuilder::IntAttr(m.Node("GroupNormalization", {"x", "s", "b"}, {"y"}), "num_groups", 2);
      expect(m.Bytes(), "the channels (3) must divide into num_groups = 2");
    }
    ModelBuilder m(21);
    m.Input("x", kF32, {4, 4}).Output("y", kF32, {4, 4});
    m.FloatInit("s", {2}, {1.f, 1.f});
    m.FloatInit("b", {2}, {0.f, 0.f});
    ModelBuilder::IntAttr(m.Node("GroupNormalization", {"x", "s", "b"}, {"y"}), "num_groups", 2);
    auto s2 = Session::LoadFromBytes(m.Bytes());
    ASSERT_TRUE(s2.ok()) << s2.status().ToString();
    std::vector<NamedTensor> out;
    Status st = (*s2)->Run({{"x", Iota({4, 4})}}, &out);
    EXPECT_NE(st.message().find("must have shape [4] (the channels, opset 21)"), std::string::npos)
        << st.ToString();
  }
}

// GridSample, AffineGrid, Col2Im and DeformConv refuse inconsistent shapes (when the plan is made
// at the first run) and attributes (at load), naming the rule; a grid of NaN and huge
// coordinates samples zeros (no crash).
TEST(SessionTest, SamplingOpsRefuseBadShapes) {
  auto expect = [](const std::string& bytes, const std::string& text,
                   std::vector<NamedTensor> inputs = {}) {
    auto s = Session::LoadFromBytes(bytes);
    Status st = s.ok() ? Status(OkStatus()) : s.status();
    if (s.ok()) {
      std::vector<NamedTensor> out;
      st = (*s)->Run(std::move(inputs), &out);
    }
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
  };
  {  // GridSample: the grid's last dim must be the spatial rank
    ModelBuilder m(16);
    m.Input("x", kF32, {1, 2, 4, 4}).Input("g", kF32, {1, 3, 3, 3}).Output("y", kF32, {-1});
    m.Node("GridSample", {"x", "g"}, {"y"});
    expect(m.Bytes(), "grid must be [N, O1..O2, 2] with X's N",
           {{"x", Iota({1, 2, 4, 4})}, {"g", Iota({1, 3, 3, 3})}});
  }
  {  // GridSample-16 is 4-D only; 20's mode names are not 16's
    ModelBuilder m(16);
    m.Input("x", kF32, {1, 2, 4, 4, 4}).Input("g", kF32, {1, 2, 2, 2, 3}).Output("y", kF32, {-1});
    m.Node("GridSample", {"x", "g"}, {"y"});
    expect(m.Bytes(), "X must be 4-D [N, C, H, W] before opset 20",
           {{"x", Iota({1, 2, 4, 4, 4})}, {"g", Iota({1, 2, 2, 2, 3})}});
    ModelBuilder m2(16);
    m2.Input("x", kF32, {1, 2, 4, 4}).Input("g", kF32, {1, 2, 2, 2}).Output("y", kF32, {-1});
    ModelBuilder::StringAttr(m2.Node("GridSample", {"x", "g"}, {"y"}), "mode", "linear");
    expect(m2.Bytes(), "mode must be bilinear, nearest or bicubic at this opset; got 'linear'");
  }
  {  // AffineGrid: theta must fit the size's rank
    ModelBuilder m(20);
    m.Input("theta", kF32, {2, 2, 3}).Output("y", kF32, {-1});
    m.Int64Init("size", {5}, {2, 1, 3, 4, 5});
    m.Node("AffineGrid", {"theta", "size"}, {"y"});
    expect(m.Bytes(), "theta must be [N, 3, 4] for a 3-D size; got [2,2,3]",
           {{"theta", Iota({2, 2, 3})}});
  }
  {  // Col2Im: the columns must hold one entry per block
    ModelBuilder m(18);
    m.Input("x", kF32, {1, 4, 10}).Output("y", kF32, {-1});
    m.Int64Init("image", {2}, {4, 4});
    m.Int64Init("block", {2}, {2, 2});
    m.Node("Col2Im", {"x", "image", "block"}, {"y"});
    expect(m.Bytes(), "input dim 2 must equal the number of blocks [3,3] = 9; got 10",
           {{"x", Iota({1, 4, 10})}});
  }
  {  // DeformConv: offset must be [N, offset_group * kH * kW * 2, oH, oW]
    ModelBuilder m(19);
    m.Input("x", kF32, {1, 2, 5, 5}).Input("off", kF32, {1, 9, 3, 3}).Output("y", kF32, {-1});
    m.FloatInit("w", {4, 2, 3, 3}, std::vector<float>(72, 0.1f));
    m.Node("DeformConv", {"x", "w", "off"}, {"y"});
    expect(m.Bytes(), "offset must be [1,18,3,3]; got [1,9,3,3]",
           {{"x", Iota({1, 2, 5, 5})}, {"off", Iota({1, 9, 3, 3})}});
  }
  {  // NaN and huge grid coordinates read zero padding
    ModelBuilder m(16);
    m.Input("x", kF32, {1, 1, 2, 2}).Input("g", kF32, {1, 1, 3, 2}).Output("y", kF32, {-1});
    m.Node("GridSample", {"x", "g"}, {"y"});
    auto s = Session::LoadFromBytes(m.Bytes());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    Tensor g = Iota({1, 1, 3, 2});
    const float vals[] = {NAN, 0.f, 1e30f, -1e30f, 0.f, 0.f};
    std::copy(vals, vals + 6, g.data<float>());
    std::vector<NamedTensor> out;
    Status st = (*s)->Run({{"x", Iota({1, 1, 2, 2})}, {"g", g}}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out[0].tensor.data<float>()[0], 0.f);
    EXPECT_EQ(out[0].tensor.data<float>()[1], 0.f);
    // The centre of [[0, 1], [2, 3]] with bilinear, align_corners 0: the mean, 1.5.
    EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[2], 1.5f);
  }
}

TEST(SessionTest, BadInputsNameWhatWasExpectedAndGiven) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  std::vector<NamedTensor> out;
  struct Case {
    std::vector<NamedTensor> in;
    std::vector<std::string> must_mention;
  };
  std::vector<Case> cases = {
      {{}, {"missing input 'x'", "float32[N,3]"}},
      {{{"z", Iota({1, 3})}}, {"unknown input 'z'", "'x'"}},
      {{{"x", Tensor::Empty(DataType::kInt64, {1, 3})}},
       {"input 'x'", "dtype", "float32[N,3]", "int64[1,3]"}},
      {{{"x", Iota({3})}}, {"input 'x'", "rank", "float32[3]"}},
      {{{"x", Iota({1, 4})}}, {"input 'x'", "dimension 1 must be 3", "float32[1,4]"}},
      {{{"x", Iota({1, 3})}, {"x", Iota({1, 3})}}, {"more than once"}},
  };
  for (const auto& c : cases) {
    Status st = s->Run(c.in, &out);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    for (const auto& m : c.must_mention)
      EXPECT_NE(st.message().find(m), std::string::npos) << st.message() << " lacks " << m;
  }
}

TEST(SessionTest, ReportsEveryUnsupportedNodeAtOnce) {
  ModelBuilder m(13);
  m.ImportDomain("com.example", 1);
  m.ImportDomain("ai.onnx.ml", 3);
  m.Input("x", kF32, {2, 3}).Output("y", kF32, {-1, -1});
  m.Node("Relu", {"x"}, {"a"}, "fine");
  m.Node("Scaler", {"a"}, {"b"}, "ml", "ai.onnx.ml");  // not in kiln
  m.Node("FancyOp", {"x"}, {"c"}, "custom", "com.example");
  m.Node("Add", {"a", "x"}, {"y"}, "fine_too");
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  const std::string& msg = s.status().message();
  EXPECT_NE(msg.find("2 unsupported nodes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'ml' Scaler (ai.onnx.ml opset 3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'custom' FancyOp (com.example opset 1)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'fine'"), std::string::npos) << msg;
}

TEST(SessionTest, RejectsAttributesItCannotHonour) {
  ModelBuilder m(13);
  m.Input("x", kF32, {1, 1, 4, 4}).Output("y", kF32, {-1, -1, -1, -1});
  auto& n = m.Node("MaxPool", {"x"}, {"y"}, "pool");
  ModelBuilder::IntsAttr(n, "kernel_shape", {2, 2});
  ModelBuilder::IntsAttr(n, "strides", {0, 1});
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'pool'"), std::string::npos) << s.status().message();
}

// PyTorch's flatten export: Shape -> Gather -> Unsqueeze -> Concat -> Reshape. With concrete
// input shapes the shape sub-graph folds at prepare time; only Relu and Reshape run.
TEST(SessionTest, FoldsShapeSubgraphOncePerSignature) {
  ModelBuilder m(13);
  m.Input("x", kF32, {-1, 2, 3}).Output("y", kF32, {-1, 6});
  m.Int64Init("zero", {}, {0});
  m.Int64Init("axes", {1}, {0});
  m.Int64Init("minus1", {1}, {-1});
  m.Node("Relu", {"x"}, {"r"});
  m.Node("Shape", {"r"}, {"shape"});
  m.Node("Gather", {"shape", "zero"}, {"batch"});
  m.Node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  ModelBuilder::IntAttr(m.Node("Concat", {"batch1", "minus1"}, {"newshape"}), "axis", 0);
  m.Node("Reshape", {"r", "newshape"}, {"y"});
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  auto plan = s->DescribePlan({{"x", Iota({4, 2, 3})}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find("2 steps, 4 nodes folded"), std::string::npos) << *plan;
  EXPECT_EQ(plan->find("Shape '"), std::string::npos) << *plan;
  EXPECT_NE(plan->find("float32[4,6]"), std::string::npos) << *plan;
  for (int64_t n : {1, 3}) {
    std::vector<NamedTensor> out;
    ASSERT_TRUE(s->Run({{"x", Iota({n, 2, 3}, -1.f)}}, &out).ok());
    EXPECT_EQ(out[0].tensor.shape(), (Shape{n, 6}));
    EXPECT_EQ(out[0].tensor.data<float>()[0], 0.f);
  }
}

// A step whose output only folded nodes read (the Shape of a tensor computed for nothing else)
// is dropped from the plan: it is not run, and the results do not change.
TEST(SessionTest, DropsStepsWhoseOutputsOnlyFoldedNodesRead) {
  ModelBuilder m;
  m.Input("x", kF32, {-1, 2, 3}).Output("y", kF32, {-1, 6});
  m.Int64Init("zero", {}, {0});
  m.Int64Init("axes", {1}, {0});
  m.Int64Init("minus1", {1}, {-1});
  m.Node("Sigmoid", {"x"}, {"unused"}, "only_shape_reads_me");
  m.Node("Shape", {"unused"}, {"shape"});
  m.Node("Gather", {"shape", "zero"}, {"batch"});
  m.Node("Unsqueeze", {"batch", "axes"}, {"batch1"});
  ModelBuilder::IntAttr(m.Node("Concat", {"batch1", "minus1"}, {"newshape"}), "axis", 0);
  m.Node("Relu", {"x"}, {"r"});
  m.Node("Reshape", {"r", "newshape"}, {"y"});
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  auto plan = s->DescribePlan({{"x", Iota({4, 2, 3})}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_NE(plan->find("2 steps, 4 nodes folded into constants, 1 unread steps dropped"),
            std::string::npos)
      << *plan;
  EXPECT_EQ(plan->find("only_shape_reads_me"), std::string::npos) << *plan;
  std::vector<NamedTensor> out;
  ASSERT_TRUE(s->Run({{"x", Iota({2, 2, 3}, -1.f)}}, &out).ok());
  ASSERT_EQ(out[0].tensor.shape(), (Shape{2, 6}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out[0].tensor.data<float>()[i], 0.f) << i;
}

// A Reshape whose target shape is computed from run-time data cannot be prepared statically: it
// is marked dynamic and still runs correctly.
TEST(SessionTest, RunsDataDependentShapesAtRunTime) {
  ModelBuilder m(13);
  m.Input("x", kF32, {6}).Input("shape", kI64, {2}).Output("y", kF32, {-1, -1});
  m.Node("Reshape", {"x", "shape"}, {"y"});
  auto s = MustLoad(m.Bytes());
  ASSERT_NE(s, nullptr);
  std::vector<NamedTensor> out;
  Tensor shape = Tensor::FromVector<int64_t>({3, 2}, {2});
  ASSERT_TRUE(s->Run({{"x", Iota({6})}, {"shape", shape}}, &out).ok());
  EXPECT_EQ(out[0].tensor.shape(), (Shape{3, 2}));
  auto plan = s->DescribePlan({{"x", Iota({6})}, {"shape", shape}});
  ASSERT_TRUE(plan.ok());
  EXPECT_NE(plan->find("shapes at run time"), std::string::npos) << *plan;
  Tensor bad = Tensor::FromVector<int64_t>({4, 2}, {2});
  Status st = s->Run({{"x", Iota({6})}, {"shape", bad}}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("Reshape"), std::string::npos) << st.ToString();
}

TEST(SessionTest, ConcurrentRunsAgree) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        int64_t n = 1 + (i + t) % 3;
        std::vector<NamedTensor> out;
        if (!s->Run({{"x", Iota({n, 3})}}, &out).ok() || out[0].tensor.shape()[0] != n ||
            out[0].tensor.data<float>()[2] != 2.5f)
          ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// A chain of `n` Adds over a [1, size] tensor, optimizations off (one step per node).
std::string AddChainModel(int n, int64_t size) {
  ModelBuilder m;
  m.Input("x", kF32, {1, size}).Output("y", kF32, {1, size});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string out = i + 1 == n ? "y" : "a" + std::to_string(i);
    m.Node("Add", {prev, "x"}, {out});
    prev = out;
  }
  return m.Bytes();
}

TEST(SessionTest, DeadlineAndCancel) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  std::vector<NamedTensor> out;
  RunOptions past;
  past.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(5);
  Status st = s->Run({{"x", Iota({2, 3})}}, &out, past);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("before it started"), std::string::npos) << st.ToString();
  EXPECT_TRUE(out.empty());
  std::atomic<bool> cancel{true};
  RunOptions cancelled;
  cancelled.cancel = &cancel;
  st = s->Run({{"x", Iota({2, 3})}}, &out, cancelled);
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  // A far deadline and a clear flag: the run completes, as does one with no options.
  cancel = false;
  RunOptions fine;
  fine.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
  fine.cancel = &cancel;
  ASSERT_TRUE(s->Run({{"x", Iota({2, 3})}}, &out, fine).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FLOAT_EQ(out[0].tensor.data<float>()[2], 2.5f);
  ASSERT_TRUE(s->Run({{"x", Iota({2, 3})}}, &out).ok());
}

TEST(SessionTest, CancelStopsARunBetweenSteps) {
  SessionOptions o;
  o.optimize = false;
  o.num_threads = 1;
  auto loaded = Session::LoadFromBytes(AddChainModel(400, 1 << 18), o);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Session& s = **loaded;
  const Tensor x = Iota({1, 1 << 18}, 1e-6f);
  std::vector<NamedTensor> out;
  ASSERT_TRUE(s.Run({{"x", x}}, &out).ok());  // plans; a warm run takes 400 steps
  // Time a warm run, then raise the flag about half-way through one. The flag may still land
  // between runs on a busy machine (then the run reports "before it started"), so each attempt
  // clears it and tries again with a fresh stopper.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(s.Run({{"x", x}}, &out).ok());
  const auto warm = std::chrono::steady_clock::now() - t0;
  std::atomic<bool> cancel{false};
  RunOptions ro;
  ro.cancel = &cancel;
  Status st = Status(StatusCode::kInternal, "not run");
  for (int attempt = 0; attempt < 50; ++attempt) {
    cancel = false;
    std::thread stopper([&] {
      std::this_thread::sleep_for(warm / (2 + attempt % 4));
      cancel = true;
    });
    st = s.Run({{"x", x}}, &out, ro);
    stopper.join();
    if (st.code() == StatusCode::kCancelled &&
        st.message().find("before step ") != std::string::npos)
      break;
  }
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_NE(st.message().find("before step "), std::string::npos) << st.ToString();
  ASSERT_TRUE(s.Run({{"x", x}}, &out).ok());  // the session is unharmed
}

// Memory exhaustion is a Status, not an exception: a Expand to [2^40] floats (4 TiB) folded at
// load or planned at run time.
TEST(SessionTest, OutOfMemoryIsAStatus) {
  ModelBuilder m;
  m.Input("x", kF32, {1}).Output("y", kF32, {-1});
  m.Int64Init("shape", {1}, {int64_t{1} << 40});
  m.Node("Expand", {"x", "shape"}, {"y"});
  auto s = Session::LoadFromBytes(m.Bytes());
  Status st = s.ok() ? Status() : s.status();
  if (s.ok()) {
    std::vector<NamedTensor> out;
    st = (*s)->Run({{"x", Iota({1})}}, &out);
  }
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.ToString();
  EXPECT_NE(st.message().find("out of host memory while"), std::string::npos) << st.ToString();
}

// A shape given to Prepare whose element or byte count does not fit int64 is refused; it used to
// wrap and crash planning (SIGFPE), found by the Python argument fuzzer's survey.
TEST(SessionTest, PrepareRefusesShapesWhoseSizeOverflows) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  for (Shape shape :
       {Shape{int64_t{1} << 62, 3}, Shape{int64_t{1} << 31, int64_t{1} << 31}, Shape{-2, 3}}) {
    Status st = s->Prepare({{"x", shape}});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << ShapeToString(shape) << st.ToString();
    EXPECT_NE(st.message().find("input 'x'"), std::string::npos) << st.ToString();
  }
  EXPECT_TRUE(s->Prepare({{"x", {4, 3}}}).ok());
}

// A thread count no machine has is refused at load (OpenMP would try to start them all).
TEST(SessionTest, LoadRefusesAbsurdThreadCounts) {
  SessionOptions o;
  o.num_threads = 1 << 30;
  auto s = Session::LoadFromBytes(AddReluModel(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << s.status().ToString();
  EXPECT_NE(s.status().message().find("num_threads must be at most"), std::string::npos)
      << s.status().ToString();
  o.num_threads = 2;
  EXPECT_TRUE(Session::LoadFromBytes(AddReluModel(), o).ok());
}

// RunTimings::per_node: every step with its node, op, kernel and planned output types, and a
// time; the descriptions follow the plan of each run's shapes when one RunTimings is reused.
TEST(SessionTest, PerNodeTimingsDescribeEveryStepOfTheRunsPlan) {
  auto s = MustLoad(AddReluModel());
  ASSERT_NE(s, nullptr);
  std::vector<NamedTensor> out;
  RunTimings rt;
  rt.per_node = true;
  for (int64_t batch : {2, 2, 4}) {
    ASSERT_TRUE(s->Run({{"x", Iota({batch, 3})}}, &out, &rt).ok());
    auto plan = s->DescribePlanSummary({{"x", Iota({batch, 3})}});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(rt.nodes.size(), plan->steps.size());
    for (size_t i = 0; i < rt.nodes.size(); ++i) {
      EXPECT_EQ(rt.nodes[i].kernel, plan->steps[i].kernel) << i;
      EXPECT_EQ(rt.nodes[i].node, plan->steps[i].node) << i;
      EXPECT_EQ(rt.nodes[i].op_type, plan->steps[i].op_type) << i;
      EXPECT_GE(rt.nodes[i].ms, 0.0) << i;
      EXPECT_GE(rt.nodes[i].start_us, rt.start_us) << i;
    }
    EXPECT_EQ(rt.nodes.back().outputs, "float32[" + std::to_string(batch) + ",3]");
  }
  ASSERT_TRUE(s->Run({{"x", Iota({2, 3})}}, &out, nullptr).ok());
  rt.per_node = false;
  ASSERT_TRUE(s->Run({{"x", Iota({2, 3})}}, &out, &rt).ok());
  EXPECT_TRUE(rt.nodes.empty());
}

}  // namespace
}  // namespace kiln
