#include "kiln/status.h"

#include <gtest/gtest.h>

#include "kiln/tensor.h"

namespace kiln {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("odd value; got " + std::to_string(x));
  return x / 2;
}

Status UseHalf(int x, int* out) {
  KILN_ASSIGN_OR_RETURN(*out, Half(x));
  return OkStatus();
}

TEST(StatusTest, CarriesCodeMessageAndContext) {
  Status s = InvalidModel("bad node").AddContext("while loading m.onnx");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidModel);
  EXPECT_EQ(s.ToString(), "InvalidModel: bad node\n  while loading m.onnx");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  int v = 0;
  EXPECT_TRUE(UseHalf(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = UseHalf(3, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("got 3"), std::string::npos);
}

TEST(TensorTest, EmptyIsZeroedAndAligned) {
  Tensor t = Tensor::Empty(DataType::kFloat, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], 0.f);
  Tensor c = t.Clone();
  c.data<float>()[0] = 1.f;
  EXPECT_EQ(t.data<float>()[0], 0.f);
  EXPECT_EQ(ShapeToString(t.Reshaped({6}).shape()), "[6]");
}

}  // namespace
}  // namespace kiln
