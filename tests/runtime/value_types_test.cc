// Strings, sequences and optionals (issue 42): the Tensor handles that carry them, a session
// taking and returning them, and the planner's refusal to hand one to an op not made for them.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "kiln/session.h"
#include "onnx/tensor_proto.h"

namespace kiln {
namespace {

TEST(ValueTypes, NamesAndKinds) {
  const DataType seq = SequenceOf(DataType::kFloat);
  const DataType opt_seq = OptionalOf(seq);
  EXPECT_STREQ(DataTypeName(seq), "sequence(float32)");
  EXPECT_STREQ(DataTypeName(OptionalOf(DataType::kInt64)), "optional(int64)");
  EXPECT_STREQ(DataTypeName(opt_seq), "optional(sequence(float32))");
  EXPECT_STREQ(DataTypeName(DataType::kString), "string");
  EXPECT_TRUE(IsSequenceType(seq));
  EXPECT_FALSE(IsOptionalType(seq));
  EXPECT_TRUE(IsOptionalType(opt_seq));
  EXPECT_FALSE(IsSequenceType(opt_seq));
  EXPECT_EQ(ContainedType(opt_seq), seq);
  EXPECT_EQ(ContainedType(seq), DataType::kFloat);
  EXPECT_EQ(ContainedType(DataType::kFloat), DataType::kUndefined);
  EXPECT_FALSE(IsPlainDataType(DataType::kString));
  EXPECT_FALSE(IsPlainDataType(seq));
  EXPECT_TRUE(IsPlainDataType(DataType::kUInt16));
  EXPECT_TRUE(IsIoDataType(DataType::kString));
  EXPECT_TRUE(IsIoDataType(opt_seq));
  EXPECT_FALSE(IsIoDataType(SequenceOf(DataType::kUndefined)));
  EXPECT_EQ(DataTypeSize(seq), 0u);
}

TEST(ValueTypes, HandlesShareItemsAndCloneDeeply) {
  Tensor s = Tensor::Strings({2});
  s.data<std::string>()[0] = "kiln";
  s.data<std::string>()[1] = std::string(100, 'x');  // past the small-string buffer
  Tensor f = Tensor::FromVector<float>({1.f, 2.f}, {2});
  Tensor seq = Tensor::Sequence(DataType::kFloat, {f, f});
  ASSERT_EQ(seq.items().size(), 2u);
  EXPECT_EQ(seq.rank(), 0);
  EXPECT_EQ(seq.items()[0].raw(), f.raw());  // shared, not copied

  Tensor seq_copy = seq.Clone();
  ASSERT_EQ(seq_copy.items().size(), 2u);
  EXPECT_NE(seq_copy.items()[0].raw(), f.raw());
  EXPECT_EQ(seq_copy.items()[1].data<float>()[1], 2.f);
  Tensor s_copy = s.Clone();
  s.data<std::string>()[1] = "changed";
  EXPECT_EQ(s_copy.data<std::string>()[0], "kiln");
  EXPECT_EQ(s_copy.data<std::string>()[1], std::string(100, 'x'));

  Tensor none = Tensor::Optional(DataType::kInt64, nullptr);
  EXPECT_FALSE(none.has_element());
  EXPECT_TRUE(none.defined());
  Tensor some = Tensor::Optional(SequenceOf(DataType::kFloat), &seq);
  EXPECT_TRUE(some.has_element());
  EXPECT_EQ(some.items()[0].items().size(), 2u);
  EXPECT_TRUE(f.items().empty());  // a tensor has no items

  Tensor empty_seq = Tensor::Empty(SequenceOf(DataType::kInt32), {});
  EXPECT_TRUE(empty_seq.items().empty());
  Tensor empty_str = Tensor::Empty(DataType::kString, {3});
  EXPECT_EQ(empty_str.data<std::string>()[2], "");
}

// A model whose input "s" is a sequence(float32): its length and its items concatenated.
std::string SequenceModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("seq");
  auto* in = g->add_input();
  in->set_name("s");
  in->mutable_type()
      ->mutable_sequence_type()
      ->mutable_elem_type()
      ->mutable_tensor_type()
      ->set_elem_type(onnx::TensorProto::FLOAT);
  auto* n1 = g->add_node();
  n1->set_op_type("SequenceLength");
  n1->add_input("s");
  n1->add_output("n");
  auto* n2 = g->add_node();
  n2->set_op_type("ConcatFromSequence");
  n2->add_input("s");
  n2->add_output("c");
  auto* axis = n2->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  auto* n3 = g->add_node();
  n3->set_op_type("Identity");
  n3->add_input("s");
  n3->add_output("same");
  for (auto [name, t] :
       {std::pair{"n", onnx::TensorProto::INT64}, {"c", onnx::TensorProto::FLOAT}}) {
    auto* o = g->add_output();
    o->set_name(name);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(t);
  }
  auto* out = g->add_output();
  out->set_name("same");
  *out->mutable_type() = in->type();
  return m.SerializeAsString();
}

TEST(ValueTypes, SessionTakesAndReturnsSequences) {
  auto session = Session::LoadFromBytes(SequenceModel());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ((*session)->inputs()[0].dtype, SequenceOf(DataType::kFloat));
  Tensor a = Tensor::FromVector<float>({1.f, 2.f}, {2});
  Tensor b = Tensor::FromVector<float>({3.f}, {1});
  std::vector<NamedTensor> outs;
  Status s = (*session)->Run({{"s", Tensor::Sequence(DataType::kFloat, {a, b, a})}}, &outs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].tensor.data<int64_t>()[0], 3);
  ASSERT_EQ(outs[1].tensor.shape(), Shape({5}));
  EXPECT_EQ(outs[1].tensor.data<float>()[2], 3.f);
  EXPECT_EQ(outs[1].tensor.data<float>()[4], 2.f);
  ASSERT_EQ(outs[2].tensor.dtype(), SequenceOf(DataType::kFloat));
  EXPECT_EQ(outs[2].tensor.items().size(), 3u);

  // Twice more: the plan is reused, with a different number of items.
  s = (*session)->Run({{"s", Tensor::Sequence(DataType::kFloat, {b})}}, &outs);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(outs[0].tensor.data<int64_t>()[0], 1);
  EXPECT_EQ(outs[1].tensor.shape(), Shape({1}));
}

TEST(ValueTypes, SessionChecksSequenceItems) {
  auto session = Session::LoadFromBytes(SequenceModel());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<NamedTensor> outs;
  // A sequence whose item is not of its declared element type.
  Tensor wrong = Tensor::Sequence(DataType::kFloat, {Tensor::FromVector<int64_t>({1}, {1})});
  Status s = (*session)->Run({{"s", wrong}}, &outs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("item 0 is int64"), std::string::npos) << s.ToString();
  // A plain tensor where a sequence is declared.
  s = (*session)->Run({{"s", Tensor::FromVector<float>({1.f}, {1})}}, &outs);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("wrong dtype"), std::string::npos) << s.ToString();
}

// Strings reach only the ops made for them: Reshape (which copies bytes) refuses them, naming
// the node and the type, instead of copying nothing.
TEST(ValueTypes, OpsNotMadeForStringsRefuseThem) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("str");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(1);
  shape->add_int64_data(4);
  auto* n = g->add_node();
  n->set_op_type("Reshape");
  n->set_name("flat");
  n->add_input("x");
  n->add_input("shape");
  n->add_output("y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::STRING);
  auto session = Session::LoadFromBytes(m.SerializeAsString());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Tensor x = Tensor::Strings({2, 2});
  std::vector<NamedTensor> outs;
  Status s = (*session)->Run({{"x", x}}, &outs);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.ToString();
  EXPECT_NE(s.message().find("Reshape node 'flat'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("input 0 is a string value"), std::string::npos) << s.ToString();
}

// Bad test-data files: garbage where a sequence or optional is declared, and a string tensor whose
// string_data count does not match its dims, are errors naming what is wrong.
TEST(ValueTypes, ParsingBadValuesGivesClearErrors) {
  auto seq = onnxio::ParseValueProto("\xff\xff\xff garbage", SequenceOf(DataType::kFloat));
  ASSERT_FALSE(seq.ok());
  EXPECT_NE(seq.status().message().find("SequenceProto"), std::string::npos)
      << seq.status().ToString();
  auto opt = onnxio::ParseValueProto("\xff\xff\xff garbage", OptionalOf(DataType::kInt64));
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("OptionalProto"), std::string::npos)
      << opt.status().ToString();
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::STRING);
  t.add_dims(3);
  t.add_string_data("a");
  auto str = onnxio::ParseTensorProto(t.SerializeAsString());
  ASSERT_FALSE(str.ok());
  EXPECT_NE(str.status().message().find("holds 1 strings; dims [3] need 3"), std::string::npos)
      << str.status().ToString();
}

}  // namespace
}  // namespace kiln
