// NonMaxSuppression and RoiAlign in whole models: NMS's data-dependent output feeding later nodes
// (Gather of the selected boxes) on the CPU backend and on the reference kernels, and the clear
// errors bad inputs get (a batch index out of range, malformed boxes). Their semantics are checked
// by ONNX's node tests (9 NMS and 3 RoiAlign cases in the onnx 1.19.1 suite).
#include <gtest/gtest.h>

#include "kiln/session.h"
#include "model_builder.h"

namespace kiln {
namespace {

using testing::ModelBuilder;
constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

// selected = NMS(boxes, scores, max 2, iou 0.5); kept = Gather(boxes[0], selected[:, 2]).
// Box counts are symbolic, so a mismatch reaches the op.
std::string NmsThenGather() {
  ModelBuilder m(13);
  m.Input("boxes", kF32, {1, -1, 4}).Input("scores", kF32, {1, 1, -1});
  m.Output("selected", kI64, {-1, 3}).Output("kept", kF32, {-1, 4});
  m.Int64Init("max", {1}, {2});
  m.FloatInit("iou", {1}, {0.5f});
  m.Int64Init("zero", {}, {0});
  m.Int64Init("two", {}, {2});
  m.Node("NonMaxSuppression", {"boxes", "scores", "max", "iou"}, {"selected"});
  ModelBuilder::IntAttr(m.Node("Gather", {"selected", "two"}, {"box_index"}), "axis", 1);
  ModelBuilder::IntAttr(m.Node("Gather", {"boxes", "zero"}, {"b0"}), "axis", 0);
  ModelBuilder::IntAttr(m.Node("Gather", {"b0", "box_index"}, {"kept"}), "axis", 0);
  return m.Bytes();
}

TEST(DetectionOpsTest, NmsOutputFeedsLaterNodes) {
  // Boxes 0 and 1 overlap (IoU 0.81); 2 is apart; 3 overlaps 2 a little (IoU 0.14).
  Tensor boxes = Tensor::FromVector<float>(
      {0, 0, 10, 10, 0, 1, 10, 11, 20, 20, 30, 30, 22, 22, 32, 32}, {1, 4, 4});
  Tensor scores = Tensor::FromVector<float>({0.9f, 0.95f, 0.5f, 0.7f}, {1, 1, 4});
  for (bool reference : {true, false}) {
    SessionOptions o;
    o.reference_only = reference;
    auto s = Session::LoadFromBytes(NmsThenGather(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::vector<NamedTensor> out;
    Status r = (*s)->Run({{"boxes", boxes}, {"scores", scores}}, &out);
    ASSERT_TRUE(r.ok()) << r.ToString();
    // Box 1 (0.95) first, box 0 suppressed by it, then box 3 (0.7); max 2 per class.
    ASSERT_EQ(out[0].tensor.shape(), (Shape{2, 3}));
    const int64_t* sel = out[0].tensor.data<int64_t>();
    EXPECT_EQ(std::vector<int64_t>(sel, sel + 6), (std::vector<int64_t>{0, 0, 1, 0, 0, 3}));
    ASSERT_EQ(out[1].tensor.shape(), (Shape{2, 4}));
    EXPECT_EQ(out[1].tensor.data<float>()[1], 1.f);   // box 1's x1
    EXPECT_EQ(out[1].tensor.data<float>()[4], 22.f);  // box 3's y1
  }
}

TEST(DetectionOpsTest, NmsMalformedBoxesIsAClearError) {
  auto s = Session::LoadFromBytes(NmsThenGather());
  ASSERT_TRUE(s.ok());
  std::vector<NamedTensor> out;
  // Scores for 3 boxes against 4 boxes.
  Status r = (*s)->Run({{"boxes", Tensor::Empty(DataType::kFloat, {1, 4, 4})},
                        {"scores", Tensor::Empty(DataType::kFloat, {1, 1, 3})}},
                       &out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("boxes must be [batches, boxes, 4] and scores [batches, classes, "
                             "boxes]; got [1,4,4] and [1,1,3]"),
            std::string::npos)
      << r.ToString();
  EXPECT_NE(r.message().find("NonMaxSuppression node"), std::string::npos) << r.ToString();
}

TEST(DetectionOpsTest, RoiAlignBatchIndexOutOfRange) {
  ModelBuilder m(16);
  m.Input("x", kF32, {1, 2, 5, 5}).Input("rois", kF32, {1, 4}).Input("b", kI64, {1});
  m.Output("y", kF32, {});
  auto& n = m.Node("RoiAlign", {"x", "rois", "b"}, {"y"});
  ModelBuilder::IntAttr(n, "output_height", 2);
  ModelBuilder::IntAttr(n, "output_width", 2);
  auto s = Session::LoadFromBytes(m.Bytes());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<NamedTensor> out;
  Status r = (*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {1, 2, 5, 5})},
                        {"rois", Tensor::FromVector<float>({0, 0, 4, 4}, {1, 4})},
                        {"b", Tensor::FromVector<int64_t>({1}, {1})}},
                       &out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("batch_indices[0] must be in [0, 1); got 1"), std::string::npos)
      << r.ToString();
  r = (*s)->Run({{"x", Tensor::Empty(DataType::kFloat, {1, 2, 5, 5})},
                 {"rois", Tensor::FromVector<float>({0, 0, 4, 4}, {1, 4})},
                 {"b", Tensor::FromVector<int64_t>({0}, {1})}},
                &out);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(out[0].tensor.shape(), (Shape{1, 2, 2, 2}));
}

}  // namespace
}  // namespace kiln
