// The way out of kiln's IR (onnx/onnx_writer.h): a loaded model written back passes ONNX's own
// model checker (libonnx's check_model, full check), loads again and computes the same outputs,
// and keeps what the IR holds (metadata, symbolic dims, subgraphs reading outer values, old IR
// versions' initializer inputs). What the IR cannot hold is refused, not dropped.
#include "onnx/onnx_writer.h"

#include <gtest/gtest.h>
#include <onnx/checker.h>

#include "kiln/session.h"
#include "model_builder.h"
#include "onnx/onnx_loader.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;

StatusOr<std::string> RoundTrip(const std::string& bytes) {
  KILN_ASSIGN_OR_RETURN(auto g, onnxio::LoadModelFromBytes(bytes, ""));
  return onnxio::SerializeModel(*g);
}

// libonnx's full model check (the opset schemas, SSA, topological order, types).
void ExpectOnnxAccepts(const std::string& bytes) {
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(bytes));
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    FAIL() << "ONNX's checker refused the written model: " << e.what();
  }
}

std::vector<NamedTensor> RunBytes(const std::string& bytes, const std::vector<NamedTensor>& in) {
  auto s = Session::LoadFromBytes(bytes);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  std::vector<NamedTensor> out;
  if (!s.ok()) return out;
  auto st = (*s)->Run(in, &out);
  EXPECT_TRUE(st.ok()) << st.ToString();
  // The session goes away with this scope: copy the outputs out of its memory.
  for (auto& o : out) o.tensor = o.tensor.Clone();
  return out;
}

void ExpectSameOutputs(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    ASSERT_EQ(a[i].tensor.shape(), b[i].tensor.shape());
    ASSERT_EQ(a[i].tensor.bytes(), b[i].tensor.bytes());
    EXPECT_EQ(0, std::memcmp(a[i].tensor.raw(), b[i].tensor.raw(), a[i].tensor.bytes()))
        << a[i].name;
  }
}

// y = If(cond) { x * w (w read from the outer graph) } else { x + c (c a Constant node) },
// with a symbolic batch dim, metadata, and an attribute of each plain kind on the way.
std::string BranchyModel() {
  ModelBuilder mb;
  mb.Input("x", kF32, {-1, 3})
      .Input("cond", onnx::TensorProto::BOOL, {})
      .Output("y", kF32, {-1, 3});
  mb.FloatInit("w", {3}, {0.5f, -2.f, 4.f});
  auto* kv = mb.proto().add_metadata_props();
  kv->set_key("labels");
  kv->set_value("cat,dog,bird");
  mb.proto().set_producer_name("writer-test");
  mb.proto().set_model_version(7);
  auto& c = mb.Node("Constant", {}, {"c"}, "make_c");
  auto* t = c.add_attribute();
  t->set_name("value");
  t->set_type(onnx::AttributeProto::TENSOR);
  t->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  t->mutable_t()->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) t->mutable_t()->add_float_data(v);
  auto& clip = mb.Node("LeakyRelu", {"x"}, {"xl"}, "leaky");
  ModelBuilder::FloatAttr(clip, "alpha", 0.25f);
  ModelBuilder::Subgraph then_b, else_b;
  then_b.Output("t_out", kF32, {-1, 3});
  then_b.Node("Mul", {"xl", "w"}, {"t_out"});
  else_b.Output("e_out", kF32, {-1, 3});
  else_b.Node("Add", {"xl", "c"}, {"e_out"});
  auto& n = mb.Node("If", {"cond"}, {"y"}, "branch");
  ModelBuilder::GraphAttr(n, "then_branch", then_b);
  ModelBuilder::GraphAttr(n, "else_branch", else_b);
  return mb.Bytes();
}

TEST(OnnxWriter, RoundTripKeepsWhatTheIrHolds) {
  const std::string original = BranchyModel();
  auto written = RoundTrip(original);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ExpectOnnxAccepts(*written);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*written));
  EXPECT_EQ(m.producer_name(), "writer-test");
  EXPECT_EQ(m.model_version(), 7);
  ASSERT_EQ(m.metadata_props_size(), 1);
  EXPECT_EQ(m.metadata_props(0).value(), "cat,dog,bird");
  ASSERT_EQ(m.graph().input_size(), 2);
  const auto& dim0 = m.graph().input(0).type().tensor_type().shape().dim(0);
  EXPECT_FALSE(dim0.has_dim_value());
  EXPECT_EQ(dim0.dim_param(), "N");  // ModelBuilder names a symbolic dim "N"
  auto s = Session::LoadFromBytes(*written);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->metadata().custom.size(), 1u);
  for (bool cond : {true, false}) {
    Tensor b = Tensor::Empty(DataType::kBool, {});
    *static_cast<bool*>(b.raw()) = cond;
    std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>({1, -2, 3, -4, 5, -6}, {2, 3})},
                                   {"cond", b}};
    ExpectSameOutputs(RunBytes(original, in), RunBytes(*written, in));
  }
  // Written twice, the same bytes: the writer is deterministic.
  auto again = RoundTrip(*written);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *RoundTrip(*again));
}

TEST(OnnxWriter, OldIrVersionsListInitializersAsInputs) {
  ModelBuilder mb(9);
  mb.proto().set_ir_version(3);
  mb.Input("x", kF32, {2}).Output("y", kF32, {2});
  mb.FloatInit("w", {2}, {3.f, 4.f});
  auto* wi = mb.proto().mutable_graph()->add_input();
  wi->set_name("w");
  wi->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
  mb.Node("Add", {"x", "w"}, {"y"});
  auto written = RoundTrip(mb.Bytes());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ExpectOnnxAccepts(*written);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(*written));
  EXPECT_EQ(m.ir_version(), 3);
  ASSERT_EQ(m.graph().input_size(), 2);
  EXPECT_EQ(m.graph().input(1).name(), "w");
  std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>({1, 2}, {2})}};
  ExpectSameOutputs(RunBytes(mb.Bytes(), in), RunBytes(*written, in));
}

TEST(OnnxWriter, RefusesAttributesTheIrDoesNotHold) {
  ModelBuilder mb;
  mb.Input("x", kF32, {2}).Output("y", kF32, {2});
  mb.Node("Relu", {"x"}, {"y"}, "odd");
  // The loader turns a sparse tensor or a list of tensors or graphs into an attribute of kind
  // kOther without contents; ONNX's checker refuses such an attribute on Relu, so it is set on
  // the loaded graph.
  auto g = onnxio::LoadModelFromBytes(mb.Bytes(), "");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ir::Attribute other;  // what the loader makes of a kind it does not keep
  (*g)->nodes[0].attrs["extra"] = other;
  auto written = onnxio::SerializeModel(**g);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(written.status().message().find("'odd'"), std::string::npos)
      << written.status().message();
  EXPECT_NE(written.status().message().find("'extra'"), std::string::npos);
}

}  // namespace
}  // namespace kiln
